"""Phrase lists matched as whole words: one normalisation and one pattern builder for every
data-driven matcher (yes/no answers, router evidence terms, later the quick observer)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


def normalize(text: str) -> str:
    """Lower case, straight apostrophes, single spaces: what every phrase is matched against."""
    return " ".join(text.lower().replace("’", "'").split())


def phrase_pattern(phrases: Iterable[str]) -> re.Pattern[str]:
    """One compiled alternation of the phrases as whole words, longest first.

    A phrase may carry a regular expression when it is written `re:<pattern>`; plain
    phrases are matched literally. Compiled once per list (callers build them per turn
    from the clinic's names and keywords).
    """
    return _compiled(tuple(phrases))


@lru_cache(maxsize=4096)
def _compiled(phrases: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = []
    for phrase in phrases:
        if phrase.startswith("re:"):
            alternatives.append(f"(?:{phrase[3:]})")
        else:
            alternatives.append(re.escape(normalize(phrase)))
    alternatives.sort(key=len, reverse=True)
    return re.compile(r"(?<![\w'])(?:" + "|".join(alternatives) + r")(?![\w'])")
