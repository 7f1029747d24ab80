"""Graphs built from other graphs: `include`, `omit` and `guard_all`, resolved before validation.

A graph file may start from others instead of copying them:

- `include: [clinic_booking, parts/outbound]` merges those files (bundled graphs or
  fragments under `graphs/parts/`) in order, then this file on top: phases, actions,
  tools, tool sets, super-states and states by name (a later one replaces an earlier
  one whole), global exits by name (replaced in place, new ones appended), and every
  other key (id, version, description, initial state, time limit) from the last file
  that gives it.
- `omit: [init, greeting]` drops states or super-states the included files brought
  that this graph does not use (an unreachable state would not load).
- `guard_all: {guard: NAME, except_states: [...], except_tools: [...]}` adds one guard to
  every tool and one requirement to every state, except those listed (the lists of
  every file are joined). It is how a graph says "nothing here runs before X holds"
  without repeating it on each of the tools and states it took from another graph.

The result is a plain graph definition: what is stored as a version names no includes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

# Sections merged entry by entry (a later entry of the same name replaces the earlier).
KEYED_SECTIONS = ("phases", "actions", "tools", "tool_sets", "super_states", "states")
COMPOSE_KEYS = ("include", "omit", "guard_all")

# A graph file's raw data by its name under flows/graphs/ (`clinic_booking`, `parts/outbound`).
Loader = Callable[[str], dict[str, Any]]


class CompositionError(ValueError):
    """An include that cannot be resolved (unknown file, a cycle, a bad directive)."""


def compose(data: Any, load: Loader, *, seen: tuple[str, ...] = (), top: bool = True) -> Any:
    """`data` with its includes merged in and its directives applied (unchanged when it
    has none). An included file (`top` False) keeps its `guard_all` for the including
    graph to apply: a fragment's exceptions join the includer's, nothing is guarded twice."""
    if not isinstance(data, dict) or not any(key in data for key in COMPOSE_KEYS):
        return data
    merged: dict[str, Any] = {}
    guard_all: dict[str, Any] = {}
    for name in _names(data.get("include", []), "include"):
        if name in seen:
            raise CompositionError(f"include cycle: {' -> '.join((*seen, name))}")
        part = compose(load(name), load, seen=(*seen, name), top=False)
        if not isinstance(part, dict):
            raise CompositionError(f"include {name!r}: not a graph")
        guard_all = _merge_guard_all(guard_all, part.get("guard_all"))
        _merge_into(merged, part)
    _merge_into(merged, {k: v for k, v in data.items() if k not in COMPOSE_KEYS})
    for name in _names(data.get("omit", []), "omit"):
        if name not in merged.get("states", {}) and name not in merged.get("super_states", {}):
            raise CompositionError(f"omit: {name!r} is not a state or super-state of the includes")
        merged.get("states", {}).pop(name, None)
        merged.get("super_states", {}).pop(name, None)
    guard_all = _merge_guard_all(guard_all, data.get("guard_all"))
    if guard_all and top:
        _guard_everything(merged, guard_all)
    elif guard_all:
        merged["guard_all"] = guard_all
    return merged


def _names(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CompositionError(f"{key}: a list of names")
    return value


def _merge_into(merged: dict[str, Any], part: dict[str, Any]) -> None:
    for key, value in part.items():
        if key == "guard_all":
            continue
        if key in KEYED_SECTIONS:
            if not isinstance(value, dict):
                raise CompositionError(f"{key}: a mapping")
            merged.setdefault(key, {}).update(copy.deepcopy(value))
        elif key == "global_exits":
            merged["global_exits"] = _merge_exits(merged.get("global_exits", []), value)
        else:
            merged[key] = copy.deepcopy(value)


def _merge_exits(before: list[Any], after: Any) -> list[Any]:
    if not isinstance(after, list):
        raise CompositionError("global_exits: a list")
    exits = list(before)
    for exit_ in copy.deepcopy(after):
        name = exit_.get("name") if isinstance(exit_, dict) else None
        at = next((i for i, e in enumerate(exits) if isinstance(e, dict)
                   and e.get("name") == name), None)
        if at is None:
            exits.append(exit_)
        else:
            exits[at] = exit_
    return exits


def _merge_guard_all(into: dict[str, Any], given: Any) -> dict[str, Any]:
    if given is None:
        return into
    if not isinstance(given, dict) or not isinstance(given.get("guard"), str):
        raise CompositionError("guard_all: {guard: NAME, except_states: [...], except_tools: [...]}")
    unknown = set(given) - {"guard", "except_states", "except_tools"}
    if unknown:
        raise CompositionError(f"guard_all: unknown keys {sorted(unknown)}")
    if into and into["guard"] != given["guard"]:
        raise CompositionError(f"guard_all: one guard per graph ({into['guard']!r} and "
                               f"{given['guard']!r})")
    return {
        "guard": given["guard"],
        "except_states": [*into.get("except_states", []),
                          *_names(given.get("except_states", []), "guard_all.except_states")],
        "except_tools": [*into.get("except_tools", []),
                         *_names(given.get("except_tools", []), "guard_all.except_tools")],
    }


def _guard_everything(graph: dict[str, Any], directive: dict[str, Any]) -> None:
    guard = directive["guard"]
    states, tools = graph.get("states", {}), graph.get("tools", {})
    stray = sorted({*(s for s in directive["except_states"] if s not in states),
                    *(t for t in directive["except_tools"] if t not in tools)})
    if stray:
        raise CompositionError(f"guard_all: {stray} are not states or tools of this graph")
    for name, spec in tools.items():
        if name not in directive["except_tools"] and guard not in spec.get("guards", []):
            spec["guards"] = [*spec.get("guards", []), guard]
    for name, spec in states.items():
        if name not in directive["except_states"] and guard not in spec.get("requires", []):
            spec["requires"] = [*spec.get("requires", []), guard]
