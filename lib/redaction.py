"""Keep PHI and secrets out of logs: phone numbers and keys are masked before logging."""

from __future__ import annotations

import re

_PHONE = re.compile(r"\+?\d[\d\s().-]{6,}\d")


# E.164 numbers have at most 15 digits; formatting and an extension fit well within this.
MAX_PHONE_CHARS = 40
# Longest value from a client (a webhook field, a header) a log line repeats.
MAX_LOGGED_CHARS = 40


def mask_phone(number: str | None) -> str:
    """'+15551234567' -> '+*********67': enough to correlate, not to identify. Anything
    longer than a phone number could be is not one: only its length is shown."""
    if not number:
        return "<none>"
    if len(number) > MAX_PHONE_CHARS:
        return f"<not a phone number: {len(number)} characters>"
    digits = re.sub(r"\D", "", number)
    if len(digits) <= 2:
        return "*" * len(digits)
    return ("+" if number.strip().startswith("+") else "") + "*" * (len(digits) - 2) + digits[-2:]


def mask_phones_in(text: str) -> str:
    """Mask every phone-number-looking run in free text (for error messages)."""
    return _PHONE.sub(lambda match: mask_phone(match.group(0)), text)


def mask_secret(secret: str | None) -> str:
    """Show only that a secret is set, and its first characters for identification."""
    if not secret:
        return "<unset>"
    return secret[:4] + "…" if len(secret) > 8 else "****"


def loggable(value: str | None, max_chars: int = MAX_LOGGED_CHARS) -> str:
    """A value a client sent, fit for one log line: unprintable characters (a newline that
    would forge a line, terminal escapes) as `?`, at most `max_chars`, its length said when
    cut. Not for PHI: mask that (`mask_phone`) or leave it out."""
    if value is None:
        return "<none>"
    text = "".join(char if char.isprintable() else "?" for char in value[:max_chars])
    return text if len(value) <= max_chars else f"{text}… ({len(value)} characters)"
