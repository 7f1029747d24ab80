"""Memory across calls: how fast a patient's memories fade, and when two are one."""

from __future__ import annotations

from pydantic import Field

from config.group import SettingsGroup


class MemorySettings(SettingsGroup):
    """A memory's weight halves every half-life since it was last said, each time it was
    said again slowing that; two memories close enough in meaning are one, said again."""

    half_life_days: float = Field(
        default=90.0, gt=0, le=3650, validation_alias="memory_half_life_days",
        description="Days for a memory said once to fade to half its weight; each time "
        "a later call says it again the half-life grows by as much again.")
    floor: float = Field(
        default=0.125, ge=0, lt=1, validation_alias="memory_floor",
        description="Weight below which a memory is left out of recall and search (0.125: "
        "three half-lives unsaid).")
    dedupe_similarity: float = Field(
        default=0.68, gt=0, le=1, validation_alias="memory_dedupe_similarity",
        description="Cosine similarity at which a new memory is an earlier one said again "
        "(and names no different day, time, place, person or body part). Calibrated on "
        "paraphrases and different facts with the local WordLlama embedder "
        "(tests/db/test_memories.py); calibrate again for another embedding model.")
    search_similarity: float = Field(
        default=0.3, ge=0, le=1, validation_alias="memory_search_similarity",
        description="Cosine similarity a memory needs to a search query to be found at all "
        "(calibrated with the local embedder, as above).")
    extraction_timeout_s: float = Field(
        default=20.0, gt=0, le=300, validation_alias="memory_extraction_timeout_s",
        description="Longest wait for the fast model to pick what to remember from a "
        "finished call (then the rules pick).")
