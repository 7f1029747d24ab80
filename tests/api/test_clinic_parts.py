"""One part of a clinic file changed on its own: items found by name (any case, when only
one answers) or by position; adding never replaces; the clinic header is one object."""

from __future__ import annotations

import pytest

from api.clinic_parts import (
    ItemNotFound,
    NotAList,
    Part,
    add_item,
    delete_item,
    position,
    read,
    replace_item,
    replace_part,
)
from db.clinic.file import ClinicFileInvalid


def data() -> dict:
    return {"version": 1, "clinic": {"name": "Quayside"},
            "practitioners": [{"name": "Dr. Ada Byrne"}, {"name": "Cara Lind"}],
            "closures": [{"from": "2031-12-25", "reason": "Christmas"}]}


def test_named_items_are_found_by_name_in_any_case_and_positions_by_number():
    file = data()
    assert position(file, Part.PRACTITIONERS, "Cara Lind") == 1
    assert position(file, Part.PRACTITIONERS, "dr. ada byrne") == 0
    assert position(file, Part.CLOSURES, "0") == 0
    for part, key in [(Part.PRACTITIONERS, "Nobody"), (Part.PRACTITIONERS, "0"),
                      (Part.CLOSURES, "1"), (Part.CLOSURES, "-1"), (Part.CLOSURES, "٠"),
                      (Part.SCHEDULES, "0"), (Part.LOCATIONS, "")]:
        with pytest.raises(ItemNotFound):
            position(file, part, key)


def test_a_name_two_items_share_in_another_case_is_not_guessed():
    file = {"practitioners": [{"name": "Lee Wong"}, {"name": "lee wong"}]}
    assert position(file, Part.PRACTITIONERS, "lee wong") == 1  # the exact one
    with pytest.raises(ItemNotFound):
        position(file, Part.PRACTITIONERS, "LEE WONG")


def test_each_edit_changes_its_part_and_nothing_else():
    file = data()
    add_item(Part.LOCATIONS, {"name": "Harbour"})(file)
    replace_item(Part.PRACTITIONERS, "Cara Lind", {"name": "Cara Lind", "title": "Nurse"})(file)
    delete_item(Part.CLOSURES, "0")(file)
    replace_part(Part.CLINIC, {"name": "Quayside", "greeting": "Hello."})(file)

    assert read(file, Part.LOCATIONS) == [{"name": "Harbour"}]
    assert read(file, Part.PRACTITIONERS)[1] == {"name": "Cara Lind", "title": "Nurse"}
    assert read(file, Part.CLOSURES) == []
    assert read(file, Part.CLINIC) == {"name": "Quayside", "greeting": "Hello."}
    assert read({}, Part.SCHEDULES) == [] and read({}, Part.CLINIC) == {}


def test_adding_a_name_the_part_has_is_refused_with_the_path():
    file = data()
    with pytest.raises(ClinicFileInvalid) as refused:
        add_item(Part.PRACTITIONERS, {"name": " cara lind "})(file)
    [problem] = refused.value.problems
    assert problem.path == "practitioners[2].name" and "practitioners[1]" in problem.message
    with pytest.raises(ClinicFileInvalid):
        replace_item(Part.PRACTITIONERS, "Cara Lind", {"name": "Dr. Ada Byrne"})(data())


def test_the_clinic_header_is_replaced_whole_never_added_to():
    for edit in (add_item(Part.CLINIC, {"name": "x"}), delete_item(Part.CLINIC, "name"),
                 replace_item(Part.CLINIC, "name", {"name": "x"})):
        with pytest.raises(NotAList):
            edit(data())
    assert Part.APPOINTMENT_TYPES.section == "appointment_types"
