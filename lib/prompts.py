"""Prompt templates live as files under `prompts/`; this loads and fills them by name."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@lru_cache(maxsize=64)
def load_prompt(name: str) -> Template:
    """Load `prompts/<name>` (e.g. "fallback/offer_callback.txt"); fails loudly if missing."""
    path = (PROMPTS_DIR / name).resolve()
    if PROMPTS_DIR not in path.parents:
        raise ValueError(f"prompt name escapes the prompts folder: {name!r}")
    return Template(path.read_text(encoding="utf-8").strip())


def render_prompt(name: str, **values: str) -> str:
    """Fill `$name` placeholders; a missing value is an error, not a silent gap."""
    return load_prompt(name).substitute(values)
