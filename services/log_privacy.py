"""Keep PHI out of every log line: a loguru patcher that masks phone numbers, dates
(dates of birth are written like any other date), e-mail addresses and the values of
known PHI keys (`name=...`, `"phone": "..."`) in the message and in string extras.

One compiled alternation scans a message once; a message with no digit, `@`, `=` or `:`
is returned untouched without running it. Phone numbers keep their last two digits
(`services.redaction.mask_phone`) so lines about one caller can still be correlated.
Not covered: exception tracebacks, which loguru renders after the patcher runs.
"""

from __future__ import annotations

import re
from typing import Any

from services.redaction import mask_phone

# Keys whose values are PHI wherever they appear as key=value or "key": "value".
PHI_KEYS = (
    "name", "first_name", "last_name", "full_name", "patient_name", "caller_name",
    "patient", "dob", "date_of_birth", "birth_date", "birthdate", "phone", "phone_number",
    "from_number", "to_number", "caller_id", "email", "address", "transcript", "mrn",
    "insurance_member_id", "member_id", "ssn",
)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?:[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]\d\d|20\d\d)"
_KEYS = "|".join(sorted(PHI_KEYS, key=len, reverse=True))

_PATTERN = re.compile(
    # "name": "Ada Byrne" / 'phone': '+1555…' (JSON or Python repr): the quoted value.
    rf"""(?P<qkey>["']?\b(?:{_KEYS})["']?\s*:\s*)(?P<quote>["'])(?P<qval>(?:\\.|(?!(?P=quote)).)*)(?P=quote)"""
    # name=Ada Byrne / phone=+1555… : up to a space, comma or bracket, and any
    # capitalised words after it (the rest of a name).
    rf"""|(?P<kkey>\b(?:{_KEYS})=)(?P<kval>[^\s,;)}}\]]+(?:\s+(?-i:[A-Z])[\w'-]*)*)"""
    r"|(?P<email>\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)"
    # 1970-01-02, 01/02/1970, 1.2.70, 2-1-1970
    rf"|(?P<date>(?<![\w-])(?:{_YEAR}[-/.][01]?\d[-/.][0-3]?\d"
    r"|[0-3]?\d[-/.][0-3]?\d[-/.](?:\d\d)?\d\d)(?!-|(?![Tt])\w)"
    # January 2, 1970 / Jan 2nd 1970 / 2 January 1970 / 2nd of January, 1970
    rf"|\b{_MONTHS}\s+{_DAY},?\s+{_YEAR}\b|\b{_DAY}\s+(?:of\s+)?{_MONTHS},?\s+{_YEAR}\b)"
    # +15551234567, (555) 123-4567, 555 123 4567, 5551234: seven digits or more.
    r"|(?P<phone>(?<![\w-])\+?\(?(?:\d[\s().-]{0,2}){6,14}\d(?![\w-]))",
    re.IGNORECASE,
)
_MAYBE = re.compile(r"[\d@=:]")


def _replace(match: re.Match[str]) -> str:
    if match.group("qkey") is not None:
        quote = match.group("quote")
        return f"{match.group('qkey')}{quote}<redacted>{quote}"
    if match.group("kkey") is not None:
        return f"{match.group('kkey')}<redacted>"
    if match.group("email") is not None:
        return "<email>"
    if match.group("date") is not None:
        return "<date>"
    return mask_phone(match.group("phone"))


def mask_phi(text: str) -> str:
    """`text` with phone numbers, dates, e-mails and PHI key values masked."""
    if not _MAYBE.search(text):
        return text
    return _PATTERN.sub(_replace, text)


def mask_record(record: dict[str, Any]) -> None:
    """Loguru patcher: mask the message and string extras in place."""
    record["message"] = mask_phi(record["message"])
    extra = record["extra"]
    for key, value in extra.items():
        if isinstance(value, str):
            extra[key] = "<redacted>" if key in PHI_KEYS else mask_phi(value)
