"""A clinic as a readable YAML file: sections in the documented order, short lists on
one line, times and numbers quoted (so no YAML reader can take them for numbers)."""

from __future__ import annotations

from datetime import date
from typing import Any

import yaml

from db.clinic.model import SECTIONS, ClinicFile

HEADER = "# Clinic file, version 1: see \"Your clinic\" in README.md.\n"


class _Flow(list):
    """A list written on one line: [a, b]."""


class _FlowMap(dict):
    """A mapping written on one line: {a: 1, b: 2}."""


class _Quoted(str):
    """Text written in double quotes: "09:00", "+15550100100"."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)  # list items indented under their key


_Dumper.add_representer(_Flow, lambda dumper, value: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", value, flow_style=True))
_Dumper.add_representer(_FlowMap, lambda dumper, value: dumper.represent_mapping(
    "tag:yaml.org,2002:map", value, flow_style=True))
_Dumper.add_representer(_Quoted, lambda dumper, value: dumper.represent_scalar(
    "tag:yaml.org,2002:str", value, style='"'))


def dump_clinic_yaml(clinic: ClinicFile) -> str:
    data = clinic.as_data()
    shaped = {
        "version": data["version"],
        "clinic": _clinic(data["clinic"]),
        "locations": [_location(entry) for entry in data["locations"]],
        "practitioners": [_FlowMap(entry) for entry in data["practitioners"]],
        "appointment_types": [_with_flow(entry, "keywords") for entry in
                              data["appointment_types"]],
        "schedules": [_schedule(entry) for entry in data["schedules"]],
        "closures": [_closure(entry) for entry in data["closures"]],
    }
    parts = [yaml.dump({section: shaped[section]}, Dumper=_Dumper, sort_keys=False,
                       allow_unicode=True, width=96, default_flow_style=False)
             for section in SECTIONS]
    return HEADER + "\n".join(parts)


def _clinic(details: dict[str, Any]) -> dict[str, Any]:
    shaped = dict(details)
    shaped["phone_numbers"] = _Flow(_Quoted(n) for n in details.get("phone_numbers", []))
    return _with_flow(shaped, "keyterms")


def _location(entry: dict[str, Any]) -> dict[str, Any]:
    shaped = dict(entry)
    if entry.get("phone_number"):
        shaped["phone_number"] = _Quoted(entry["phone_number"])
    shaped["opening_hours"] = {day: _times(hours)
                               for day, hours in entry["opening_hours"].items()}
    return shaped


def _schedule(entry: dict[str, Any]) -> dict[str, Any]:
    shaped = _with_flow(entry, "days", "offers")
    shaped["blocks"] = _Flow(_times(block) for block in entry["blocks"])
    for key in ("valid_from", "valid_until"):
        if key in entry:
            shaped[key] = date.fromisoformat(entry[key])
    return shaped


def _closure(entry: dict[str, Any]) -> dict[str, Any]:
    shaped = dict(entry)
    for key in ("from", "to"):
        if key in entry:
            shaped[key] = date.fromisoformat(entry[key])
    return shaped


def _with_flow(entry: dict[str, Any], *keys: str) -> dict[str, Any]:
    shaped = dict(entry)
    for key in keys:
        if key in entry:
            shaped[key] = _Flow(entry[key])
    return shaped


def _times(pair: list[str]) -> _Flow:
    return _Flow(_Quoted(moment) for moment in pair)
