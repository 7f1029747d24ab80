"""The parts of a clinic file the API changes one at a time, and how one item of a part is
found. Each change is a pure edit of the file's data (`ClinicFile.as_data()`); the route
then checks the whole file and imports it, as any import is checked and applied.

Items of the named parts (locations, practitioners, appointment types) are addressed by
name; schedules and closures, which have no name, by their position in the part as it
is read (0 first).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from db.clinic.file import ClinicFileInvalid, Problem

FileData = dict[str, Any]
Edit = Callable[[FileData], None]


class Part(StrEnum):
    """A part of the clinic file, as its URL names it."""

    CLINIC = "clinic"
    LOCATIONS = "locations"
    PRACTITIONERS = "practitioners"
    APPOINTMENT_TYPES = "appointment-types"
    SCHEDULES = "schedules"
    CLOSURES = "closures"

    @property
    def section(self) -> str:
        """The file's key for this part ("appointment_types")."""
        return self.value.replace("-", "_")

    @property
    def named(self) -> bool:
        return self in (Part.LOCATIONS, Part.PRACTITIONERS, Part.APPOINTMENT_TYPES)

    @property
    def is_list(self) -> bool:
        return self is not Part.CLINIC


class ItemNotFound(LookupError):
    """No item of the part answers to the key (404)."""


class NotAList(ValueError):
    """Items are added to, replaced in or removed from list parts only (the clinic
    header is one object: it is replaced whole)."""


def read(data: FileData, part: Part) -> Any:
    """The part as the file says it: a list, or the clinic header."""
    return data.get(part.section, [] if part.is_list else {})


def _items(data: FileData, part: Part) -> list[Any]:
    if not part.is_list:
        raise NotAList(f"{part.value} is one object: replace it with PUT")
    items = data.setdefault(part.section, [])
    if not isinstance(items, list):  # an exported file always has lists
        raise NotAList(f"{part.value} is not a list")
    return items


def position(data: FileData, part: Part, key: str) -> int:
    """Where the item `key` names is in the part; ItemNotFound when none is."""
    items = _items(data, part)
    if part.named:
        exact = [i for i, item in enumerate(items) if _name(item) == key]
        if exact:
            return exact[0]
        folded = [i for i, item in enumerate(items) if _name(item).casefold() == key.casefold()]
        if len(folded) == 1:
            return folded[0]
        raise ItemNotFound(f"no {part.value} entry named {key!r}")
    if key.isascii() and key.isdigit() and int(key) < len(items):
        return int(key)
    raise ItemNotFound(f"no {part.value} entry at position {key!r} (there are {len(items)}; "
                       "the first is 0)")


def _name(item: Any) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) else ""


def _unique_name(items: list[Any], part: Part, index: int) -> None:
    """Refuse an item whose name another item of the part already has: adding one must
    never quietly replace another."""
    name = _name(items[index]).strip().casefold()
    if not part.named or not name:
        return
    for other, item in enumerate(items):
        if other != index and _name(item).strip().casefold() == name:
            raise ClinicFileInvalid([Problem(
                f"{part.section}[{index}].name", None,
                f"{part.section}[{other}] is already named {_name(item)!r}: change that one "
                "instead, or give this one another name")])


def replace_part(part: Part, value: Any) -> Edit:
    def edit(data: FileData) -> None:
        data[part.section] = value
    return edit


def add_item(part: Part, item: Any) -> Edit:
    def edit(data: FileData) -> None:
        items = _items(data, part)
        items.append(item)
        _unique_name(items, part, len(items) - 1)
    return edit


def replace_item(part: Part, key: str, item: Any) -> Edit:
    def edit(data: FileData) -> None:
        items = _items(data, part)
        index = position(data, part, key)
        items[index] = item
        _unique_name(items, part, index)
    return edit


def delete_item(part: Part, key: str) -> Edit:
    def edit(data: FileData) -> None:
        del _items(data, part)[position(data, part, key)]
    return edit
