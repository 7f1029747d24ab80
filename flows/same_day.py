"""What an identified caller did on their calls of today, as each call's analysis put it.

A call's summary says what it did (`done`, each with a caller-facing `recap`: "booked a
physiotherapy appointment for Tuesday at 10 AM") or, when it did nothing, what the
caller wanted (each `wanted` item's `recap`: "asked about our opening hours"). Summaries
that do not have that shape are skipped, never guessed at.
"""

from __future__ import annotations

from typing import Any

from flows.graph_session import GraphSession

RECAPS_SAID = 3


def _recap(item: Any) -> str | None:
    if isinstance(item, dict) and isinstance(item.get("recap"), str) and item["recap"].strip():
        return item["recap"].strip().rstrip(".")
    return None


def _recaps(items: Any) -> list[str]:
    return [r for r in map(_recap, items if isinstance(items, list) else []) if r]


def recaps(session: GraphSession) -> list[str]:
    """What the caller did earlier today, oldest call first, each once (at most
    RECAPS_SAID, the latest kept)."""
    said: list[str] = []
    for call in reversed(session.earlier_today):
        found = _recaps(call.summary.get("done")) or _recaps(call.summary.get("wanted"))
        said += [r for r in found if r not in said]
    return said[-RECAPS_SAID:]


def left_for_team(session: GraphSession) -> list[str]:
    """What earlier calls today left for a person to do, as written."""
    left: list[str] = []
    for call in reversed(session.earlier_today):
        items = call.summary.get("left_for_person")
        for item in items if isinstance(items, list) else []:
            text = item.get("text") if isinstance(item, dict) else None
            if isinstance(text, str) and text.strip() and text.strip() not in left:
                left.append(text.strip())
    return left
