"""Prompts are files, filled by name; a missing value is an error."""

import pytest

from lib.prompts import render_prompt


def test_greeting_names_the_clinic():
    assert "Riverside Clinic" in render_prompt("greeting.txt", clinic_name="Riverside Clinic")


def test_missing_placeholder_value_is_an_error():
    with pytest.raises(KeyError):
        render_prompt("greeting.txt")


def test_prompt_names_cannot_escape_the_prompts_folder():
    with pytest.raises(ValueError):
        render_prompt("../config.py")
