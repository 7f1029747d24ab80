"""Keep PHI and secrets out of logs: phone numbers and keys are masked before logging."""

from __future__ import annotations

import re

_PHONE = re.compile(r"\+?\d[\d\s().-]{6,}\d")


def mask_phone(number: str | None) -> str:
    """'+15551234567' -> '+*********67': enough to correlate, not to identify."""
    if not number:
        return "<none>"
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
