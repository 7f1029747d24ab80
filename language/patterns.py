"""Checks for regular expressions that come from data files (validated at load)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def valid_regex(pattern: str) -> str:
    """`pattern`, if it compiles; a ValueError naming it otherwise (for pydantic)."""
    try:
        re.compile(pattern)
    except re.error as error:
        raise ValueError(f"bad regular expression {pattern!r}: {error}") from error
    return pattern


def whole_words(regex: str) -> str:
    """`regex`, matched only where a word starts and ends."""
    return rf"\b(?:{regex})\b"


def any_of(patterns: Iterable[str]) -> str:
    """One alternation of `patterns`, each matched as whole words."""
    return whole_words("|".join(f"(?:{p})" for p in patterns))
