"""Phone numbers and secrets are masked before they reach a log line."""

from lib.redaction import mask_phone, mask_phones_in, mask_secret


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
