"""Insurance carriers as callers name them: only ever one the clinic lists."""

import pytest
import yaml
from pydantic import ValidationError

from db.world import Carrier
from language.carriers import CARRIERS_FILE, CarrierList, default_carriers, match_carrier

CARRIERS = [Carrier(f"carrier-{i}", spec.name, tuple(spec.aliases), None)
            for i, spec in enumerate(default_carriers(), 1)]


def test_the_bundled_carrier_file_validates_and_names_each_carrier_once():
    carriers = default_carriers()
    names = [c.name.lower() for c in carriers]
    assert len(carriers) >= 10 and len(set(names)) == len(names)
    owners: dict[str, set[str]] = {}
    for carrier in carriers:
        for name in (carrier.name, *carrier.aliases):
            owners.setdefault(name.lower(), set()).add(carrier.name)
    assert {said: who for said, who in owners.items() if len(who) > 1} == {}  # no alias is shared


def test_a_carrier_file_with_an_unknown_key_or_no_carriers_is_refused():
    data = yaml.safe_load(CARRIERS_FILE.read_text())
    data["carriers"][0]["payer_id"] = "60054"
    with pytest.raises(ValidationError):
        CarrierList.model_validate(data)
    with pytest.raises(ValidationError):
        CarrierList.model_validate({"carriers": []})


@pytest.mark.parametrize(("said", "carrier"), [
    ("blue cross", "Blue Cross Blue Shield"),
    ("Blue Cross", "Blue Cross Blue Shield"),
    ("signa", "Cigna"),
    ("UHC", "UnitedHealthcare"),
    ("united health care", "UnitedHealthcare"),
    ("Aetnaa", "Aetna"),  # a misspelling
    ("Humanna", "Humana"),
    ("untied healthcare", "UnitedHealthcare"),
    ("kaiser", "Kaiser Permanente"),
    ("medicaid", "Medicaid"),  # not Medicare
])
def test_what_callers_say_finds_the_listed_carrier(said, carrier):
    match = match_carrier(said, CARRIERS)
    assert match is not None and match.carrier.name == carrier
    assert match.said == " ".join(said.lower().split()) and match.score >= 85


@pytest.mark.parametrize("said", ["geico", "health", "my insurance", "state farm", "blue", "",
                                  "   "])
def test_a_name_no_listed_carrier_resembles_is_no_match(said):
    assert match_carrier(said, CARRIERS) is None


def test_a_clinic_that_lists_no_carriers_matches_nothing():
    assert match_carrier("aetna", []) is None


def test_only_the_clinic_s_own_carriers_are_matched():
    only_aetna = [c for c in CARRIERS if c.name == "Aetna"]
    assert match_carrier("blue cross", only_aetna) is None
    assert match_carrier("aetna", only_aetna).carrier.id == only_aetna[0].id
