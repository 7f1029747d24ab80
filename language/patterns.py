"""Checks for regular expressions that come from data files (validated at load)."""

from __future__ import annotations

import re


def valid_regex(pattern: str) -> str:
    """`pattern`, if it compiles; a ValueError naming it otherwise (for pydantic)."""
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"bad regular expression {pattern!r}: {error}") from error
    return pattern
