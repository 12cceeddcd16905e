"""The figure reader, as a property: a value rendered in every style people write reads back
as that value, and ordinary prose (dates, clock times, phone numbers, ids) yields no figure
that is not written there."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv.workspace.text import approximates, as_number, figures, numbers_in, restyle


def _grouped(n: int, sep: str) -> str:
    return f"{n:,}".replace(",", sep)


STYLES: dict[str, Callable[[int], str]] = {
    "plain": str,
    "comma": lambda n: f"{n:,}",
    "comma-cents": lambda n: f"{n:,}.00",
    "dollar": lambda n: f"${n:,}",
    "dollar-space": lambda n: f"$ {n:,}",
    "usd-glued": lambda n: f"USD{n}",
    "usd-spaced": lambda n: f"USD {n:,}",
    "code-after": lambda n: f"{n:,} EUR",
    "code-after-glued": lambda n: f"{n}EUR",
    "euro-dots": lambda n: f"€{_grouped(n, '.')}" if n >= 1000 else f"€{n}",
    "eur-dots-cents": lambda n: f"EUR {_grouped(n, '.')},00",
    "swiss": lambda n: f"CHF {_grouped(n, chr(39))}",
    "thin-space": lambda n: _grouped(n, "\u202f"),
    "nbsp-euro-after": lambda n: f"{_grouped(n, chr(160))} €",
    "space-euro": lambda n: f"{_grouped(n, ' ')} €",
    "space-code": lambda n: f"GBP {_grouped(n, ' ')}",
    "dollars-word": lambda n: f"{n:,} dollars",
}
SCALED: dict[str, Callable[[int], str]] = {
    "k": lambda n: f"{n / 1000:g}k",
    "K-dollar": lambda n: f"${n / 1000:g}K",
    "thousand": lambda n: f"{n / 1000:g} thousand",
    "grand": lambda n: f"{n / 1000:g} grand",
}
MILLIONS: dict[str, Callable[[int], str]] = {
    "M": lambda n: f"${n / 1e6:g}M",
    "m": lambda n: f"{n / 1e6:g}m",
    "mn": lambda n: f"EUR {n / 1e6:g}mn",
    "million": lambda n: f"{n / 1e6:g} million",
    "decimal-comma-mn": lambda n: f"{n / 1e6:g} mn €".replace(".", ","),
}
BILLIONS: dict[str, Callable[[int], str]] = {
    "bn": lambda n: f"{n / 1e9:g}bn", "billion": lambda n: f"{n / 1e9:g} billion"}
AROUND = ["The total is {} this quarter.", "({}), approved", "Budget: {}; thanks", "{}"]


def _reads(text: str, value: float) -> bool:
    return any(abs(v - value) < 1e-6 * max(1.0, value) for v in numbers_in(text))


@settings(max_examples=1000, deadline=None)
@given(st.integers(min_value=0, max_value=10**10), st.sampled_from(sorted(STYLES)),
       st.sampled_from(AROUND))
def test_a_value_in_every_style_reads_back(n: int, style: str, frame: str) -> None:
    written = STYLES[style](n)
    text = frame.format(written)
    assert _reads(text, n), (style, text, numbers_in(text))
    assert as_number(written) == n, (style, written)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=9999), st.sampled_from(AROUND),
       st.sampled_from(["k", "M", "bn"]))
def test_scale_words_and_suffixes_read_back(n: int, frame: str, unit: str) -> None:
    scale = {"k": 10, "M": 10_000, "bn": 10_000_000}[unit]
    value = n * scale  # values whose scaled form is exact in :g
    table = {"k": SCALED, "M": MILLIONS, "bn": BILLIONS}[unit]
    for style, write in table.items():
        text = frame.format(write(value))
        assert _reads(text, value), (style, text, numbers_in(text))


@given(st.integers(min_value=1, max_value=99), st.integers(min_value=1, max_value=99))
def test_a_range_gives_both_ends_the_scale(a: int, b: int) -> None:
    low, high = sorted((a, b))
    for text in (f"{low}-{high}k", f"${low} to {high}k", f"{low}\u2013{high} thousand"):
        assert _reads(text, low * 1000) and _reads(text, high * 1000), (text, numbers_in(text))


_DAYS = st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 12, 31))
DATES = _DAYS.map(lambda d: d.isoformat()) | _DAYS.map(lambda d: f"{d.month}/{d.day}/{d.year}") \
    | _DAYS.map(lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}")
TIMES = st.times().map(lambda t: f"{t.hour}:{t.minute:02d}") | st.times().map(
    lambda t: t.strftime("%H:%M:%S"))
PHONES = st.tuples(st.integers(200, 999), st.integers(200, 999), st.integers(0, 9999)).flatmap(
    lambda p: st.sampled_from([f"{p[0]}-{p[1]}-{p[2]:04d}", f"({p[0]}) {p[1]}-{p[2]:04d}",
                               f"+1 {p[0]} {p[1]} {p[2]:04d}", f"+44 20 {p[1]} {p[2]:04d}"]))


@given(st.one_of(DATES, TIMES, PHONES))
def test_dates_times_and_phone_numbers_are_not_figures(token: str) -> None:
    text = f"Call me on {token} please."
    assert numbers_in(text) == (), (text, numbers_in(text))


@given(st.sampled_from(["INV", "PO", "TCK", "Q"]), st.integers(1, 99999), st.integers(1, 999))
def test_ids_and_plain_counts_yield_only_what_is_written(prefix: str, n: int, count: int) -> None:
    text = f"Ticket {prefix}-{n} affects {count} people in 3 500 offices."
    assert set(numbers_in(text)) <= {float(n), float(count), 3.0, 500.0}, numbers_in(text)


@pytest.mark.parametrize(("text", "value"), [
    ("Base is just under $90k.", 89_500), ("around 12k", 12_150), ("~1.2 million", 1_180_000)])
def test_approximations_are_recognised(text: str, value: float) -> None:
    assert any(approximates(text, f, value, 0.05) for f in figures(text))


@pytest.mark.parametrize(("text", "value"), [
    ("Our estimate was $88,730.", 89_500), ("about 120k", 89_500), ("12k", 12_150)])
def test_precise_or_distant_figures_are_not_approximations(text: str, value: float) -> None:
    assert not any(approximates(text, f, value, 0.005) for f in figures(text))
    assert not any(approximates(text, f, value, 0.05) for f in figures(text)) or text == "12k"


@given(st.integers(1000, 10**8), st.sampled_from(sorted(STYLES)), st.integers(1000, 10**8))
def test_restyle_writes_a_value_the_way_it_was_written(n: int, style: str, other: int) -> None:
    text = f"Amount: {STYLES[style](n)} now"
    (f,) = [f for f in figures(text) if f.exact]
    swapped = text[:f.start] + restyle(f, other) + text[f.end:]
    assert _reads(swapped, other), (text, swapped)
