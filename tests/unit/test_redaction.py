"""Phone numbers and secrets are masked before they reach a log line."""

import logging

import uvicorn.config

from lib.log_privacy import QuerySecretFilter, uvicorn_log_config
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


def test_secrets_in_a_query_string_never_reach_the_access_log():
    request = "/api/calls?limit=5&api_key=vk_ab12cd_s3cr3tPart&Token=abc&x_auth_token=t0k&q=key"
    access = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", request, "1.1", 200), None)
    handshake = logging.LogRecord(
        "uvicorn.error", logging.INFO, __file__, 1, '%s - "WebSocket %s" [accepted]',
        ("127.0.0.1:5000", "/api/observe?key=vk_ab12cd_s3cr3tPart"), None)

    for record in (access, handshake):
        assert QuerySecretFilter().filter(record)
    line, socket_line = access.getMessage(), handshake.getMessage()

    assert "s3cr3t" not in line + socket_line and "abc" not in line and "t0k" not in line
    assert "limit=5" in line and "q=key" in line and line.endswith('HTTP/1.1" 200')
    assert "api_key=<redacted>" in line and "?key=<redacted>" in socket_line


def test_the_servers_log_configuration_filters_every_handler():
    config = uvicorn_log_config()
    assert all("query_secrets" in handler["filters"] for handler in config["handlers"].values())
    assert "filters" not in uvicorn.config.LOGGING_CONFIG["handlers"]["access"]
