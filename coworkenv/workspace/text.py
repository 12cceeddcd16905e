"""Text matching for checks, selectors, conditional replies and safety rules.

Office text states one figure many ways: ``$1,250``, ``1250``, ``1,250.00``, ``USD1250``,
``EUR 1.250``, ``1'250``, ``1 250 €``, ``USD 1.25k``, ``1.25 grand`` and "one thousand two
hundred fifty" are one amount. :func:`figures` reads every figure written in digits, the way
people write them: a currency code or symbol before or after (glued or spaced); thousands
separated by ``,``, ``.``, ``'``, a thin or no-break space, or a plain space next to a currency;
decimals; scale words and suffixes (k, thousand, grand, m, mn, mm, million, bn, b, billion);
ranges (``10-12k`` is 10,000 to 12,000). Dates, clock times and phone numbers are not figures.
:func:`numbers_in` adds numbers written in words; :func:`mentions` says whether a text mentions
a needle: by value when the needle is a figure, else as a case-folded substring (white space
folded). :func:`approximates` says whether a written figure gives a value away without stating
it exactly ("just under $90k" for 89,500).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

_UNITS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
     "nineteen"])}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])}
_SCALES = {"thousand": 1_000, "grand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_SUFFIX = {"k": 1_000, "thousand": 1_000, "grand": 1_000, "m": 1_000_000, "mm": 1_000_000,
           "mn": 1_000_000, "mio": 1_000_000, "million": 1_000_000, "b": 1_000_000_000,
           "bn": 1_000_000_000, "billion": 1_000_000_000}
_CODES = ("usd", "eur", "gbp", "chf", "cad", "aud", "nzd", "jpy", "cny", "rmb", "inr", "sek",
          "nok", "dkk", "pln", "sgd", "hkd", "mxn", "brl", "zar")
_SYMBOLS = "$€£¥₹"
_CURRENCY_WORDS = ("dollars", "dollar", "bucks", "euros", "euro", "pounds", "pound", "francs",
                   "yen", "rupees")
_DOT_GROUPED = ("€", "eur", "sek", "nok", "dkk", "pln")  # €3.150 is three thousand
_THIN = "\u2009\u202f\u00a0"
_CODE = "|".join(_CODES)
_WORDS = "|".join(_CURRENCY_WORDS)
_SCALE = r"k|thousand|grand|mm|mn|mio|million|m|bn|billion|b"
# one figure: an optional currency before, the digits (grouped one way), an optional scale,
# an optional currency after; a figure never starts inside a word or another number, except
# right after a currency code glued to it (USD2300)
_FIGURE = re.compile(
    rf"(?:(?<![a-z])(?P<code>{_CODE})(?P<cgap>\s?)|(?P<sym>[{_SYMBOLS}])\s?)?"
    r"(?(code)|(?<![\w.,'\u2019/:]))"
    r"(?P<num>"
    r"(?P<comma>\d{1,3}(?:,\d{3})+)(?!\d)(?:\.(?P<cdec>\d+))?"
    r"|(?P<dots>\d{1,3}(?:\.\d{3}){2,})(?!\d)(?:,(?P<ddec>\d{1,2})(?!\d))?"
    r"|(?P<dot1>\d{1,3}\.\d{3}),(?P<d1dec>\d{1,2})(?!\d)"
    rf"|(?P<dcomma>\d{{1,3}}),(?P<dcdec>\d{{1,2}})(?=\s?(?:{_SCALE})\b)"
    r"|(?P<apos>\d{1,3}(?:['\u2019]\d{3})+)(?!\d)(?:\.(?P<adec>\d+))?"
    rf"|(?P<thin>\d{{1,3}}(?:[{_THIN}]\d{{3}})+)(?:[.,](?P<tdec>\d{{1,2}}))?(?!\d)"
    r"|(?P<space>\d{1,3}(?: \d{3})+)(?![\d.,])"
    r"|(?P<ecomma>\d{1,3}),(?P<ecdec>\d{2})(?![\d,])"
    r"|(?P<plain>\d+)(?:\.(?P<pdec>\d+))?"
    r")"
    rf"(?:(?P<sgap>\s?)(?P<scale>{_SCALE})\b)?"
    rf"(?:\s?(?P<after>{_CODE}|{_WORDS}|[{_SYMBOLS}])(?![a-z]))?",
    re.IGNORECASE)
# what is not a figure although it is digits: dates, clock times, phone numbers
_NOT_FIGURES = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
    r"|(?:\+\d{1,3}[\s.-]?)?\(?\b\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}\b"
    r"|\+\d{1,3}(?:[\s.-]\d{2,4}){2,}\b")
_RANGE_GAP = re.compile(r"\s?(?:-|\u2013|\u2014|to)\s?[$€£¥₹]?", re.IGNORECASE)
_HEDGE = re.compile(
    r"(?:around|about|roughly|approx\w*|nearly|almost|close to|just (?:under|over|below|above|"
    r"shy of)|north of|south of|shy of|in the region of|ballpark(?: of)?|circa|ca\.|some|"
    r"upwards of|~|≈)\W{0,3}$", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure written in digits: where it stands, its value and how it was written."""

    start: int
    end: int
    value: float
    grouping: str
    """The thousands separator it used ("" for none)."""
    decimals: int
    decimal_mark: str
    scale: str
    """Its scale word or suffix as written ("" for none)."""
    scale_gap: str
    currency: str
    """The currency code or symbol written with it ("" for none)."""
    exact: bool = True
    """False for a range's first end that borrowed the second's scale."""


def _masked(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _NOT_FIGURES.finditer(text)]


def _read(m: re.Match[str]) -> Figure | None:
    g = m.groupdict()
    currency = g["code"] or g["sym"] or g["after"] or ""
    decimals, mark = 0, "."
    if g["comma"]:
        whole, frac, sep = g["comma"].replace(",", ""), g["cdec"], ","
    elif g["dots"]:
        whole, frac, sep, mark = g["dots"].replace(".", ""), g["ddec"], ".", ","
    elif g["dot1"]:
        whole, frac, sep, mark = g["dot1"].replace(".", ""), g["d1dec"], ".", ","
    elif g["dcomma"]:
        whole, frac, sep, mark = g["dcomma"], g["dcdec"], "", ","
    elif g["apos"]:
        whole, frac = re.sub(r"['\u2019]", "", g["apos"]), g["adec"]
        sep = "'" if "'" in g["apos"] else "\u2019"
    elif g["thin"]:
        whole, frac = re.sub(f"[{_THIN}]", "", g["thin"]), g["tdec"]
        sep = next(c for c in g["thin"] if c in _THIN)
        mark = m.string[m.end("thin")] if frac else "."
    elif g["ecomma"]:
        if currency.lower() not in _DOT_GROUPED:
            return None  # "3,50" without a euro: two numbers
        whole, frac, sep, mark = g["ecomma"], g["ecdec"], "", ","
    elif g["space"]:
        if not (currency or g["scale"]):
            return None  # "3 500 people": two numbers, not 3,500
        whole, frac, sep = g["space"].replace(" ", ""), None, " "
    else:
        whole, frac, sep = g["plain"], g["pdec"], ""
        if frac and len(frac) == 3 and not g["scale"] and len(whole) <= 3 and \
                currency.lower() in _DOT_GROUPED:
            whole, frac, sep, mark = whole + frac, None, ".", ","  # €3.150 = 3,150 euros
    decimals = len(frac) if frac else 0
    value = float(f"{whole}.{frac}" if frac else whole)
    scale = g["scale"] or ""
    if scale:
        value *= _SUFFIX[scale.lower()]
    return Figure(m.start("num"), m.end("scale") if scale else m.end("num"), value, sep,
                  decimals, mark, scale, g["sgap"] or "", currency)


@lru_cache(maxsize=8192)
def _figures(text: str) -> tuple[Figure, ...]:
    masked = _masked(text)
    out: list[Figure] = []
    for m in _FIGURE.finditer(text):
        if any(a <= m.start("num") < b for a, b in masked):
            continue
        f = _read(m)
        if f is None:  # "3 500 people", "3,50": read each group of digits on its own
            for part in re.finditer(r"\d+", m.group("num")):
                s = m.start("num") + part.start()
                out.append(Figure(s, s + len(part.group(0)), float(part.group(0)), "", 0, ".",
                                  "", "", ""))
            continue
        out.append(f)
    # a range's first end takes the second's scale: "10-12k", "$1.2 to 1.5 million"
    ranged: list[Figure] = []
    for a, b in itertools.pairwise(out):
        if b.scale and not a.scale and _RANGE_GAP.fullmatch(text[a.end:b.start]):
            scaled = a.value * _SUFFIX[b.scale.lower()]
            if scaled <= b.value * 10:
                ranged.append(Figure(a.start, a.end, scaled, a.grouping, a.decimals,
                                     a.decimal_mark, b.scale, b.scale_gap, a.currency, False))
    return tuple(sorted([*out, *ranged], key=lambda f: (f.start, not f.exact)))


def figures(text: str) -> list[Figure]:
    """Each figure written in digits, in order (a range's borrowed reading after the plain
    one)."""
    return list(_figures(text))


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
    """Every figure the text states, by value (digits in any writing, scale words, ranges,
    numbers in words)."""
    out = [f.value for f in _figures(text)]
    out += [v for v in _words_numbers(text) if v not in out]
    return tuple(out)


_NOT_PART = re.compile(rf"(?:\s|[{_SYMBOLS}%]|\b(?:{_CODE}|{_WORDS})\b)*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def as_number(needle: str) -> float | None:
    """The value of a needle that is a figure and nothing else (``$40,000``, ``1,250.00``,
    ``EUR 1.250``, ``40 grand``, ``forty thousand dollars``); None for anything else."""
    found = [f for f in _figures(needle) if f.exact]
    if len(found) == 1:
        rest = needle[:found[0].start] + " " + needle[found[0].end:]
        return found[0].value if _NOT_PART.fullmatch(rest) else None
    if found:
        return None
    words = [w for w in _WORD.findall(needle.lower()) if w not in _CURRENCY_WORDS
             and w not in _CODES]
    if words and all(w in _UNITS or w in _TENS or w in _SCALES or w in ("hundred", "and")
                     for w in words):
        spelled = _words_numbers(needle)
        return spelled[0] if len(spelled) == 1 else None
    return None


def plain(value: float) -> str:
    """A figure as bare digits (``89500``, ``1.25``): how a value is named in reports."""
    return f"{value:.0f}" if value == int(value) else f"{value}"


def significant_digits(value: float) -> int:
    """How many significant digits a value has as written (90,000: 1; 12,500: 3)."""
    digits = f"{abs(value):.12g}".split("e")[0].replace(".", "").strip("0")
    return max(1, len(digits))


def approximates(text: str, figure: Figure, value: float, tolerance: float) -> bool:
    """Does ``figure`` (written in ``text``) give ``value`` away without stating it: a round
    figure (two significant digits or fewer), or one after a hedge ("around", "just under",
    "~"), within ``tolerance`` (relative) of the value."""
    if tolerance <= 0 or value == 0 or abs(figure.value - value) > tolerance * abs(value):
        return False
    if significant_digits(figure.value) <= 2:
        return True
    return _HEDGE.search(text[max(0, figure.start - 32):figure.start]) is not None


def restyle(shown: Figure, value: float) -> str:
    """``value`` written the way the figure ``shown`` was (separators, decimals, scale); the
    currency around it is left where it is."""
    if shown.scale:
        scaled = value / _SUFFIX[shown.scale.lower()]
        return f"{scaled:g}{shown.scale_gap}{shown.scale}"
    text = f"{value:,.{shown.decimals}f}" if shown.grouping else f"{value:.{shown.decimals}f}"
    whole, _, frac = text.partition(".")
    whole = whole.replace(",", shown.grouping)
    return whole + (shown.decimal_mark + frac if frac else "")


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


def mentions_value(text: str, value: float) -> bool:
    """Does ``text`` state ``value`` (any writing of it)?"""
    return round(value, 6) in _number_set(text)


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
