"""Phone numbers and secrets are masked before they reach a log line."""

from lib.redaction import loggable, mask_phone, mask_phones_in, mask_secret


def test_phone_numbers_keep_only_their_last_two_digits():
    assert mask_phone("+15551234567") == "+*********67"
    assert mask_phone("(555) 123-4567") == "********67"
    assert mask_phone(None) == "<none>"


def test_phone_numbers_inside_text_are_masked():
    text = mask_phones_in("call from +1 555 123 4567 failed")
    assert "123" not in text and text.endswith("67 failed")


def test_secrets_show_only_a_prefix():
    assert mask_secret("sk-ant-abcdefghijkl") == "sk-a…"
    assert mask_secret(None) == "<unset>"


def test_a_value_too_long_for_a_phone_number_shows_only_its_length():
    assert mask_phone("+1" + "5" * 100_000) == "<not a phone number: 100002 characters>"


def test_a_client_value_is_one_short_printable_line():
    assert loggable("completed") == "completed"
    assert loggable(None) == "<none>"
    assert loggable("busy\nERROR forged line\x1b[31m") == "busy?ERROR forged line?[31m"
    cut = loggable("x" * 100_000)
    assert cut == "x" * 40 + "… (100000 characters)"
