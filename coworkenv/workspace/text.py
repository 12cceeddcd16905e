"""Text matching for checks, selectors, conditional replies and safety rules.

Office text states one figure many ways: ``$1,250``, ``1250``, ``1,250.00``, ``USD 1.25k`` and
"one thousand two hundred fifty" are one amount. :func:`numbers_in` reads every figure in a
text (digits with separators and scale words, and numbers written in words);
:func:`mentions` says whether a text mentions a needle: by value when the needle is a
figure, else as a case-folded substring (white space folded).
"""

from __future__ import annotations

import re
from functools import lru_cache

_UNITS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
     "nineteen"])}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_SUFFIX = {"k": 1_000, "m": 1_000_000, "mm": 1_000_000, "bn": 1_000_000_000, "b": 1_000_000_000,
           "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_DIGITS = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s?(k|mm|m|bn|b|thousand|million|billion)\b)?",
    re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


def _words_numbers(text: str) -> list[float]:
    """Numbers written in words: "forty thousand", "one thousand two hundred and fifty"."""
    out: list[float] = []
    total = current = 0
    seen = False
    for w in [*_WORD.findall(text.lower().replace("-", " ")), "."]:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred" and seen:
            current = max(current, 1) * 100
        elif w in _SCALES and seen:
            total += max(current, 1) * _SCALES[w]
            current = 0
        elif w == "and" and seen:
            continue
        else:
            if seen:
                out.append(float(total + current))
            total = current = 0
            seen = False
            continue
        seen = True
    return out


@lru_cache(maxsize=4096)
def numbers_in(text: str) -> tuple[float, ...]:
    """Every figure the text states, by value (digits, scale words, numbers in words)."""
    out: list[float] = []
    for m in _DIGITS.finditer(text):
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        if m.group(3):
            value *= _SUFFIX[m.group(3).lower()]
        out.append(value)
    out += [v for v in _words_numbers(text) if v not in out]
    return tuple(out)


_ONLY_NUMBER = re.compile(r"^\s*(?:[$€£]|usd|eur|gbp)?\s*[\d.,]+\s*(?:k|m|bn|thousand|million|"
                          r"billion)?\s*(?:usd|eur|gbp|dollars?|euros?|%)?\s*$", re.IGNORECASE)


@lru_cache(maxsize=4096)
def as_number(needle: str) -> float | None:
    """The value of a needle that is a figure and nothing else (``$40,000``, ``1,250.00``,
    ``forty thousand dollars``); None for anything else."""
    if _ONLY_NUMBER.match(needle):
        found = numbers_in(needle)
        return found[0] if len(found) == 1 else None
    words = [w for w in _WORD.findall(needle.lower()) if w not in ("dollars", "dollar", "usd",
                                                                   "euros", "euro")]
    if words and all(w in _UNITS or w in _TENS or w in _SCALES or w in ("hundred", "and")
                     for w in words):
        found = numbers_in(needle)
        return found[0] if len(found) == 1 else None
    return None


def figures(text: str) -> list[tuple[re.Match[str], float]]:
    """Each figure written in digits, with where it stands and its value."""
    out = []
    for m in _DIGITS.finditer(text):
        value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
        if m.group(3):
            value *= _SUFFIX[m.group(3).lower()]
        out.append((m, value))
    return out


def restyle(shown: re.Match[str], value: float) -> str:
    """``value`` written the way the figure ``shown`` was (separators, decimals, scale)."""
    suffix = shown.group(3)
    if suffix:
        scaled = value / _SUFFIX[suffix.lower()]
        gap = " " if shown.group(0)[len(shown.group(1) + (shown.group(2) or "")):][:1] == " " \
            else ""
        return f"{scaled:g}{gap}{suffix}"
    decimals = len(shown.group(2)) - 1 if shown.group(2) else 0
    return f"{value:,.{decimals}f}" if "," in shown.group(1) else f"{value:.{decimals}f}"


@lru_cache(maxsize=8192)
def fold(text: str) -> str:
    return " ".join(text.casefold().split())


@lru_cache(maxsize=4096)
def _number_set(text: str) -> frozenset[float]:
    return frozenset(round(v, 6) for v in numbers_in(text))


def mentions(text: str, needle: str, *, case_sensitive: bool = False) -> bool:
    """Does ``text`` mention ``needle``: by value when the needle is a figure (any way of
    writing it), else as a substring (case-folded unless ``case_sensitive``)."""
    value = as_number(needle)
    if value is not None:
        return round(value, 6) in _number_set(text)
    if case_sensitive:
        return needle in text
    return fold(needle) in fold(text)


_ONES = list(_UNITS)
_TENS_WORDS = list(_TENS)


def spell(n: int) -> str:
    """An integer in words (``40000`` -> "forty thousand")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS_WORDS[n // 10 - 2] + ("" if n % 10 == 0 else f"-{_ONES[n % 10]}")
    if n < 1000:
        rest = n % 100
        return f"{_ONES[n // 100]} hundred" + (f" {spell(rest)}" if rest else "")
    for scale, word in ((1_000_000_000, "billion"), (1_000_000, "million"), (1_000, "thousand")):
        if n >= scale:
            rest = n % scale
            return f"{spell(n // scale)} {word}" + (f" {spell(rest)}" if rest else "")
    raise AssertionError(n)
