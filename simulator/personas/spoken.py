"""How a caller says their details out loud: dates of birth in the ways people say them,
phone numbers, spelled names. Plain functions over plain values."""

from __future__ import annotations

from datetime import date

from simulator.personas.model import DobStyle

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
          "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINAL_UNITS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                  "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


def cardinal(number: int) -> str:
    """0-99 in words: 72 → 'seventy-two'."""
    if not 0 <= number < 100:
        raise ValueError(f"{number} is outside 0-99")
    if number < 20:
        return _UNITS[number]
    tens, unit = divmod(number, 10)
    return _TENS[tens] + (f"-{_UNITS[unit]}" if unit else "")


def ordinal(number: int) -> str:
    """1-99 as an ordinal in words: 9 → 'ninth', 21 → 'twenty-first'."""
    words = cardinal(number)
    head, _, last = words.rpartition("-")
    if last in _ORDINAL_UNITS:
        last = _ORDINAL_UNITS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}-{last}" if head else last


def ordinal_digits(number: int) -> str:
    """9 → '9th', 22 → '22nd'."""
    teens = 10 <= number % 100 <= 20
    suffix = "th" if teens else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def year_words(year: int) -> str:
    """1972 → 'nineteen seventy-two', 2005 → 'two thousand five', 1900 → 'nineteen
    hundred'."""
    century, rest = divmod(year, 100)
    if 2000 <= year < 2010:
        return "two thousand" + (f" {cardinal(rest)}" if rest else "")
    if rest == 0:
        return f"{cardinal(century)} hundred"
    return f"{cardinal(century)} {'oh ' + cardinal(rest) if rest < 10 else cardinal(rest)}"


def say_date_of_birth(born: date, style: DobStyle) -> str:
    """A date of birth the way a caller says it in `style`."""
    month = MONTHS[born.month - 1]
    if style == "long":
        return f"{month} {ordinal_digits(born.day)}, {born.year}"
    if style == "ordinal_of":
        return f"the {ordinal(born.day)} of {month}, {year_words(born.year)}"
    if style == "slashes":
        return f"{born.month}/{born.day}/{born.year}"
    if style == "bare_numbers":
        return f"{cardinal(born.month)} {cardinal(born.day)} {cardinal(born.year % 100)}"
    return f"{month} {ordinal(born.day)}, {cardinal(born.year % 100)}"


def say_phone(number: str) -> str:
    """+15550100311 → '555 010 0311' (a national number as people read it out)."""
    digits = number.lstrip("+")
    national = digits[1:] if len(digits) == 11 and digits.startswith("1") else digits
    if len(national) == 10:
        return f"{national[:3]} {national[3:6]} {national[6:]}"
    return " ".join(national[i:i + 3] for i in range(0, len(national), 3))


def spell(word: str) -> str:
    """'Reid' → 'R-E-I-D' (letters only)."""
    return "-".join(letter.upper() for letter in word if letter.isalpha())
