"""STT keyterms: three layers (service, workspace, system) merged and de-duplicated per call."""

from __future__ import annotations

from collections.abc import Iterable

# Deepgram's keyterm prompting works best with a short list; longer lists dilute it.
MAX_KEYTERMS = 100


def merge_keyterms(*layers: Iterable[str], limit: int = MAX_KEYTERMS) -> list[str]:
    """Merge keyterm layers in priority order (service, workspace, system defaults).

    Whitespace is normalised and duplicates are dropped case-insensitively, keeping the
    first spelling seen, so a service's "MRI" wins over a default "mri".
    """
    merged: list[str] = []
    seen: set[str] = set()
    for layer in layers:
        for term in layer or ():
            if not isinstance(term, str):
                continue
            cleaned = " ".join(term.split())
            key = cleaned.casefold()
            if cleaned and key not in seen:
                seen.add(key)
                merged.append(cleaned)
                if len(merged) >= limit:
                    return merged
    return merged
