"""Fields as callers say them → the one form records keep (or None when it is not one)."""

from datetime import date, timedelta

import pytest

from language.fields import (
    is_e164,
    normalize_email,
    normalize_member_id,
    normalize_name,
    normalize_phone,
    parse_date,
    plausible_birth_date,
)

TODAY = date(2025, 6, 1)


@pytest.mark.parametrize("said", [
    "(312) 555-0199",
    "312-555-0199",
    "312.555.0199",
    "312 555 0199",
    "3125550199",
    "+1 312 555 0199",
    "+1 (312) 555-0199",
    "1-312-555-0199",
    "13125550199",
    "three one two five five five zero one nine nine",
    "three one two, five five five, oh one nine nine",
    "three twelve, five five five, zero one ninety nine",
    "my number is 312 555 0199",
])
def test_every_usual_way_of_giving_a_phone_number_becomes_e164(said):
    assert normalize_phone(said) == "+13125550199"


def test_an_international_number_given_with_a_plus_keeps_its_country_code():
    assert normalize_phone("+44 20 7946 0958") == "+442079460958"


@pytest.mark.parametrize("said", [
    "555-0199",  # no area code
    "312 555 019",  # a digit short
    "three one two five five five",
    "0125550199",  # area codes never start with 0 or 1
    "1 112 555 0199",
    "23125550199",  # eleven digits without the country code 1
    "call me maybe",
    "",
    None,
])
def test_an_incomplete_or_impossible_phone_number_is_none(said):
    assert normalize_phone(said) is None


def test_what_is_e164_and_what_is_not():
    assert is_e164("+13125550199") and is_e164("+442079460958")
    assert not is_e164("3125550199") and not is_e164("+0125550199") and not is_e164(None)


@pytest.mark.parametrize(("said", "email"), [
    ("jane dot doe at example dot com", "jane.doe@example.com"),
    ("Jane Dot Doe At Example Dot Com", "jane.doe@example.com"),
    ("j underscore smith at mail dash box dot co dot uk", "j_smith@mail-box.co.uk"),
    ("Jane.Doe@Example.com", "jane.doe@example.com"),
    ("jane.doe@example.com.", "jane.doe@example.com"),
])
def test_emails_spoken_or_written_become_one_address(said, email):
    assert normalize_email(said) == email


@pytest.mark.parametrize("said", ["jane at example", "jane@example", "not an email", "", None])
def test_something_that_is_not_a_whole_email_address_is_none(said):
    assert normalize_email(said) is None


@pytest.mark.parametrize(("said", "member_id"), [
    ("W123456", "W123456"),
    ("w one two three four five six", "W123456"),
    ("x y z nine eight seven six five", "XYZ98765"),
    ("w-123-456", "W123456"),
    ("abc 12 oh 3", "ABC1203"),
    ("zero zero one two three", "00123"),
])
def test_member_ids_spoken_letter_by_letter_or_with_digits_as_words(said, member_id):
    assert normalize_member_id(said) == member_id


@pytest.mark.parametrize("said", [
    "abcdef",  # no digit
    "1234",  # too short
    "w 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0",  # 21 characters
    "",
    None,
])
def test_what_cannot_be_a_member_id_is_none(said):
    assert normalize_member_id(said) is None


@pytest.mark.parametrize(("said", "name"), [
    ("o'brien", "O'Brien"),
    ("mary-jane", "Mary-Jane"),
    ("  jean   luc ", "Jean Luc"),
    ("PRIYA", "Priya"),
    ("josé", "José"),
])
def test_names_are_capitalised_word_by_word(said, name):
    assert normalize_name(said) == name


@pytest.mark.parametrize("said", ["r2d2", "Smith; DROP TABLE", "x" * 61, "", None])
def test_what_is_not_a_name_is_none(said):
    assert normalize_name(said) is None


@pytest.mark.parametrize("said", [
    "1948-03-14",
    "03/14/1948",
    "3/14/1948",
    "March 14th 1948",
    "March 14th, 1948",
    "14 March 1948",
    "the fourteenth of march nineteen forty eight",
    "march fourteenth nineteen forty eight",
    date(1948, 3, 14),
])
def test_a_date_in_any_usual_form_is_parsed(said):
    assert parse_date(said, TODAY) == date(1948, 3, 14)


def test_month_first_is_how_numeric_dates_are_read():
    assert parse_date("03/04/1948", TODAY) == date(1948, 3, 4)


@pytest.mark.parametrize("said", ["March 1948", "garbage", "", "   ", None])
def test_a_date_missing_a_part_or_not_a_date_is_none(said):
    assert parse_date(said, TODAY) is None


def test_a_relative_day_is_not_a_full_date():
    assert parse_date("yesterday", TODAY) in (None, TODAY - timedelta(days=1))


def test_a_birth_date_must_be_in_the_past_and_within_a_lifetime():
    assert plausible_birth_date(date(1948, 3, 14), TODAY)
    assert plausible_birth_date(TODAY - timedelta(days=1), TODAY)  # born yesterday
    assert plausible_birth_date(date(TODAY.year - 119, 1, 1), TODAY)
    assert not plausible_birth_date(TODAY, TODAY)
    assert not plausible_birth_date(TODAY + timedelta(days=1), TODAY)
    assert not plausible_birth_date(date(2030, 1, 1), TODAY)
    assert not plausible_birth_date(date(TODAY.year - 130, 6, 1), TODAY)
    assert not plausible_birth_date(None, TODAY)


def test_a_future_date_is_parsed_but_is_not_a_birth_date():
    born = parse_date("March 14 2030", TODAY)
    assert born == date(2030, 3, 14) and not plausible_birth_date(born, TODAY)
