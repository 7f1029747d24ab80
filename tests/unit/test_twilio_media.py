"""Twilio media-stream messages: junk is classified, never fatal."""

import base64
import json

import pytest

from services.twilio.serializer import BadMessage, check_media, parse_message

LIMIT = 64 * 1024


def media(payload: str) -> dict:
    return {"event": "media", "media": {"payload": payload}}


def test_a_media_event_parses():
    message = parse_message(json.dumps(media(base64.b64encode(b"\xff" * 160).decode())), LIMIT)
    check_media(message)
    assert message["event"] == "media"


@pytest.mark.parametrize(
    "raw, kind",
    [
        ("{not json", "invalid_json"),
        ("[1, 2, 3]", "not_an_event"),
        ('"hello"', "not_an_event"),
        ('{"no_event": true}', "not_an_event"),
        ('{"event": 42}', "not_an_event"),
    ],
)
def test_malformed_messages_are_named(raw, kind):
    with pytest.raises(BadMessage) as caught:
        parse_message(raw, LIMIT)
    assert caught.value.kind == kind


def test_an_oversized_message_is_rejected_before_parsing():
    with pytest.raises(BadMessage) as caught:
        parse_message("x" * (LIMIT + 1), LIMIT)
    assert caught.value.kind == "oversized"


@pytest.mark.parametrize(
    "message, kind",
    [
        ({"event": "media"}, "media_without_payload"),
        (media("not base64!!"), "media_bad_base64"),
        (media(base64.b64encode(b"\xff" * 9000).decode()), "media_oversized"),
    ],
)
def test_bad_media_payloads_are_named(message, kind):
    with pytest.raises(BadMessage) as caught:
        check_media(message)
    assert caught.value.kind == kind
