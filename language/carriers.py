"""Insurance carriers as callers name them, matched fuzzily against the workspace's table.

A carrier is only ever one the clinic lists: "blue cross" finds Blue Cross Blue
Shield, "signa" finds Cigna, and a name nothing resembles is no match (the tool
then says so instead of inventing one).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz import fuzz, process

from db.world import Carrier

CARRIERS_FILE = Path(__file__).resolve().parent / "data" / "insurance_carriers.yaml"
MIN_SCORE = 85.0


class CarrierSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=2)
    aliases: list[str] = []


class CarrierList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    carriers: list[CarrierSpec] = Field(min_length=1)


@lru_cache(maxsize=1)
def default_carriers(path: Path = CARRIERS_FILE) -> tuple[CarrierSpec, ...]:
    """The carriers every new workspace starts with (validated at load)."""
    return tuple(CarrierList.model_validate(yaml.safe_load(path.read_text())).carriers)


@dataclass(frozen=True)
class CarrierMatch:
    carrier: Carrier
    said: str
    score: float  # 0..100


def match_carrier(said: str, carriers: list[Carrier]) -> CarrierMatch | None:
    """The listed carrier the caller named, or None when nothing is close enough."""
    said = " ".join(said.lower().split())
    if not said or not carriers:
        return None
    names = {}
    for carrier in carriers:
        for name in (carrier.name, *carrier.aliases):
            names[name.lower()] = carrier
    best = process.extractOne(said, list(names), scorer=fuzz.token_sort_ratio, score_cutoff=MIN_SCORE)
    if best is None:
        return None
    name, value, _ = best
    return CarrierMatch(names[name], said, float(value))
