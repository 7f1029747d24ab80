"""Keep PHI out of every log line: a loguru patcher that masks phone numbers, dates
(dates of birth are written like any other date), e-mail addresses and the values of
known PHI keys (`name=...`, `"phone": "..."`) in the message and in the extras, nested
dicts and lists included (`mask_value`).

Cheap checks (a digit run, `@`, a key name, a year) pick the kinds a message could hold;
one compiled alternation of those kinds then scans it once, and a message that could hold
none is returned untouched. Phone numbers keep their last two digits
(`lib.redaction.mask_phone`) so lines about one caller can still be correlated.
Not covered: exception tracebacks, which loguru renders after the patcher runs.

The HTTP server's own lines (uvicorn's access log and its WebSocket handshake lines) go
through `QuerySecretFilter`: a key or token someone put in a query string is redacted.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import sys
from typing import Any

from lib.redaction import mask_phone

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
MAX_EXTRA_DEPTH = 6  # levels of nested extras masked; deeper containers are dropped

# Each kind of PHI is one alternative; a message is scanned once, by an alternation of
# only the kinds it could hold (cheap hints first: a digit run, '@', a key name).
_BRANCHES = {
    "keys": (
        # "name": "Ada Byrne" / 'phone': '+1555…' (JSON or Python repr): the quoted value.
        rf"""(?P<keys>(?P<qkey>["']?\b(?:{_KEYS})["']?\s*:\s*)"""
        r"""(?P<quote>["'])(?:\\.|(?!(?P=quote)).)*(?P=quote)"""
        # name=Ada Byrne / phone=+1555… : up to a space, comma or bracket, and any
        # capitalised words after it (the rest of a name).
        rf"""|(?P<kkey>\b(?:{_KEYS})=)[^\s,;)}}\]]+(?:\s+(?-i:[A-Z])[\w'-]*)*)"""
    ),
    "email": r"(?P<email>\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)",
    # January 2, 1970 / Jan 2nd 1970 / 2 January 1970 / 2nd of January, 1970
    "spoken_date": (
        rf"(?P<spoken_date>\b{_MONTHS}\s+{_DAY},?\s+{_YEAR}\b"
        rf"|\b{_DAY}\s+(?:of\s+)?{_MONTHS},?\s+{_YEAR}\b)"
    ),
    # 1970-01-02, 01/02/1970, 1.2.70, 2-1-1970 (a time may follow: 1970-01-02T…)
    "numeric_date": (
        rf"(?P<numeric_date>(?<![\w-])(?:{_YEAR}[-/.][01]?\d[-/.][0-3]?\d"
        r"|[0-3]?\d[-/.][0-3]?\d[-/.](?:\d\d)?\d\d)(?!-|(?![Tt])\w))"
    ),
    # +15551234567, (555) 123-4567, 555 123 4567, 5551234: seven digits or more.
    "phone": r"(?P<phone>(?<![\w-])\+?\(?(?:\d[\s().-]{0,2}){6,14}\d(?![\w-]))",
}
_KEY_HINTS = ("name", "phone", "dob", "birth", "email", "address", "transcript", "mrn",
              "patient", "member_id", "ssn", "caller_id", "_number")
_DIGIT_RUN = re.compile(r"\d[\d\s().+/-]{4,}\d")  # six characters: the shortest date or phone
_YEAR_HINT = re.compile(r"(?<!\d)(?:1[89]|20)\d\d(?!\d)")
_MONTH_HINT = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.IGNORECASE)


@functools.lru_cache(maxsize=32)
def _pattern(kinds: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(_BRANCHES[kind] for kind in kinds), re.IGNORECASE)


def _kinds(text: str) -> tuple[str, ...]:
    """Which kinds of PHI `text` could hold, by cheap checks."""
    kinds = []
    if ("=" in text or ":" in text) and any(hint in text.lower() for hint in _KEY_HINTS):
        kinds.append("keys")
    if "@" in text:
        kinds.append("email")
    if _YEAR_HINT.search(text) and _MONTH_HINT.search(text):
        kinds.append("spoken_date")
    if _DIGIT_RUN.search(text):
        kinds += ["numeric_date", "phone"]
    return tuple(kinds)


def _replace(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "keys":
        if match.group("qkey") is not None:
            quote = match.group("quote")
            return f"{match.group('qkey')}{quote}<redacted>{quote}"
        return f"{match.group('kkey')}<redacted>"
    if kind == "email":
        return "<email>"
    if kind in ("numeric_date", "spoken_date"):
        return "<date>"
    return mask_phone(match.group("phone"))


def mask_phi(text: str) -> str:
    """`text` with phone numbers, dates, e-mails and PHI key values masked."""
    kinds = _kinds(text)
    return _pattern(kinds).sub(_replace, text) if kinds else text


def mask_value(value: Any, *, key: Any = None, depth: int = 0) -> Any:
    """`value` (held under `key`) with its PHI masked: strings by `mask_phi` (wholly, under
    a PHI key), dicts, lists, tuples and sets rebuilt with their items masked (the caller's
    objects are never changed), down to `MAX_EXTRA_DEPTH` levels; a container deeper than
    that becomes `"<too deep>"`. Other values stay as they are, except numbers under a PHI
    key (a phone or member id as an int), which are redacted too."""
    phi_key = isinstance(key, str) and key.lower() in PHI_KEYS
    if isinstance(value, str):
        return "<redacted>" if phi_key else mask_phi(value)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if depth >= MAX_EXTRA_DEPTH:
            return "<too deep>"
        if isinstance(value, dict):
            return {mask_value(k, depth=depth + 1): mask_value(v, key=k, depth=depth + 1)
                    for k, v in value.items()}
        items = [mask_value(item, key=key, depth=depth + 1) for item in value]
        if isinstance(value, (set, frozenset)):
            return frozenset(items) if isinstance(value, frozenset) else set(items)
        return items if isinstance(value, list) else tuple(items)
    if phi_key and isinstance(value, (int, float)) and not isinstance(value, bool):
        return "<redacted>"
    return value


def mask_record(record: dict[str, Any]) -> None:
    """Loguru patcher: mask the message and the extras (nested ones too) in place."""
    record["message"] = mask_phi(record["message"])
    extra = record["extra"]
    for key, value in extra.items():
        extra[key] = mask_value(value, key=key)


# A query parameter whose name says it holds a secret, and our API keys wherever they are.
_QUERY_SECRET = re.compile(
    r"(?i)([?&;][^=&\s\"]*(?:key|token|secret|password|passwd|pwd|auth|signature|sig|"
    r"credential|session)[^=&\s\"]*=)([^&#\s\"]*)")
_API_KEY = re.compile(r"\b(vk_[A-Za-z0-9]+_)[A-Za-z0-9_-]+")


def redact_query_secrets(text: str) -> str:
    """`text` (a request line, a URL) with secret query values and API keys redacted."""
    text = _QUERY_SECRET.sub(lambda m: m.group(1) + "<redacted>", text)
    return _API_KEY.sub(lambda m: m.group(1) + "<redacted>", text)


class QuerySecretFilter(logging.Filter):
    """Redacts secrets from a log record's message and string arguments (the request line
    uvicorn logs keeps its shape: only the secret values change)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_query_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query_secrets(arg) if isinstance(arg, str) else arg
                                for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: redact_query_secrets(value) if isinstance(value, str) else value
                           for key, value in record.args.items()}
        return True


def uvicorn_log_config(worker: str | None = None) -> dict[str, Any]:
    """uvicorn's logging configuration with `QuerySecretFilter` on each of its handlers
    (`worker`: a worker process's name, after each line's level)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["query_secrets"] = {"()": QuerySecretFilter}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("query_secrets")
    if worker:
        for formatter in config["formatters"].values():
            formatter["fmt"] = formatter["fmt"].replace(
                "%(levelprefix)s ", f"%(levelprefix)s [{worker}] ", 1)
    return config


# loguru's own format, with the worker process's name ahead of the source when several
# worker processes write to one log.
LOG_FORMAT = ("<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
              "{extra[worker]}<cyan>{name}</cyan>:<cyan>{function}</cyan>:<cyan>{line}</cyan>"
              " - <level>{message}</level>")


def configure_logging(level: str, *, worker: str | None = None) -> None:
    """This process's log: PHI masked in every line, whatever logs it; no variable values
    in tracebacks (loguru's `diagnose` would print a caller's words); `worker` (a worker
    process's name) at the head of each line."""
    from loguru import logger

    logger.remove()
    logger.configure(patcher=mask_record, extra={"worker": f"[{worker}] " if worker else ""})
    logger.add(sys.stderr, level=level.upper(), backtrace=False, diagnose=False,
               format=LOG_FORMAT)
