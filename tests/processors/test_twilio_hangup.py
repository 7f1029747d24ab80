"""When the agent ends a call, Twilio is told to hang up (REST API), bounded and recorded."""

import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from aiohttp import web
from pipecat.frames.frames import EndFrame, StartFrame

from config import Settings
from runner.call_runner import tell_caller_unavailable
from services.twilio.serializer import (
    SafeTwilioFrameSerializer,
    TwilioCredentials,
    hang_up_twilio_call,
)
from tests.fakes import make_session
from tests.local_http import serve_http

ACCOUNT, TOKEN, CALL = "AC" + "1" * 32, "secret-token", "CA" + "2" * 32


class FakeTwilioCalls:
    """Twilio's Call resource as documented: POST Status=completed with HTTP basic auth."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.answer_status = 200
        self.ended_calls: set[str] = set()
        self.base_url = ""

    async def update_call(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        auth = request.headers.get("Authorization", "")
        self.requests.append({"path": request.path, "form": form, "auth": auth})
        if not auth.startswith("Basic "):
            return web.json_response({"code": 20003, "status": 401}, status=401)
        call_sid = request.match_info["call_sid"]
        if call_sid in self.ended_calls:
            return web.json_response({"code": 20404, "status": 404}, status=404)
        if self.answer_status != 200:
            return web.json_response({"code": 20500, "status": self.answer_status},
                                     status=self.answer_status)
        return web.json_response({"sid": call_sid, "status": form.get("Status")})


@pytest.fixture
async def twilio():
    fake = FakeTwilioCalls()
    app = web.Application()
    app.router.add_post(
        "/2010-04-01/Accounts/{account_sid}/Calls/{call_sid}.json", fake.update_call
    )
    async with serve_http(app) as fake.base_url:
        yield fake


def credentials(base_url: str) -> TwilioCredentials:
    return TwilioCredentials(ACCOUNT, TOKEN, base_url)


async def serializer_for(session, base_url: str) -> SafeTwilioFrameSerializer:
    serializer = SafeTwilioFrameSerializer(
        "MZ123", call_sid=CALL, credentials=credentials(base_url), session=session,
        max_message_bytes=4096, max_bad=3,
    )
    await serializer.setup(StartFrame(audio_in_sample_rate=8000, audio_out_sample_rate=8000))
    return serializer


async def test_ending_the_pipeline_hangs_up_the_call_once_and_records_it(twilio, writer):
    serializer = await serializer_for(make_session(writer), twilio.base_url)
    await serializer.serialize(EndFrame())
    await serializer.serialize(EndFrame())
    assert len(twilio.requests) == 1
    request = twilio.requests[0]
    assert request["path"] == f"/2010-04-01/Accounts/{ACCOUNT}/Calls/{CALL}.json"
    assert request["form"] == {"Status": "completed"} and request["auth"].startswith("Basic ")
    assert [e.data for e in writer.events("twilio_hangup")] == [{"outcome": "completed"}]


async def test_a_caller_who_already_hung_up_is_not_hung_up_again(twilio, writer):
    serializer = await serializer_for(make_session(writer), twilio.base_url)
    await serializer.deserialize(json.dumps({"event": "stop", "stop": {}}))
    await serializer.serialize(EndFrame())
    assert twilio.requests == [] and writer.events("twilio_hangup") == []


async def test_a_call_twilio_already_ended_is_not_a_failure(twilio):
    twilio.ended_calls.add(CALL)
    assert await hang_up_twilio_call(credentials(twilio.base_url), CALL) == {
        "outcome": "already_ended"
    }


async def test_a_twilio_error_is_recorded_as_a_failed_hang_up(twilio, writer):
    twilio.answer_status = 503
    serializer = await serializer_for(make_session(writer), twilio.base_url)
    await serializer.serialize(EndFrame())
    [event] = writer.events("twilio_hangup")
    assert event.data == {"outcome": "failed", "http_status": 503, "twilio_code": 20500}


async def test_an_unreachable_twilio_fails_fast_and_is_recorded(writer):
    serializer = await serializer_for(make_session(writer), "http://127.0.0.1:9")  # discard port
    await serializer.serialize(EndFrame())
    [event] = writer.events("twilio_hangup")
    assert event.data == {"outcome": "failed", "error": "ConnectError"}


async def test_a_call_we_cannot_run_is_told_so_by_twilio_instead_of_silence(twilio):
    settings = Settings(
        _env_file=None, twilio_account_sid=ACCOUNT, twilio_auth_token=TOKEN,
        twilio_api_base_url=twilio.base_url,
    )
    result = await tell_caller_unavailable(SimpleNamespace(settings=settings), CALL)
    assert result == {"outcome": "completed"}
    [request] = twilio.requests
    twiml = ET.fromstring(request["form"]["Twiml"])
    assert "technical problem" in twiml.find("Say").text and twiml.find("Hangup") is not None


async def test_without_twilio_credentials_there_is_no_one_to_speak_through(twilio):
    settings = Settings(_env_file=None, twilio_api_base_url=twilio.base_url)
    assert await tell_caller_unavailable(SimpleNamespace(settings=settings), CALL) is None
    assert twilio.requests == []


async def test_an_agreed_transfer_puts_the_caller_through_instead_of_hanging_up(twilio, writer):
    session = make_session(writer)
    session.transfer_to = "+15550100110"  # from the clinic's records, set by TransferCall
    serializer = await serializer_for(session, twilio.base_url)
    await serializer.serialize(EndFrame())
    [request] = twilio.requests
    dial = ET.fromstring(request["form"]["Twiml"]).find("Dial")
    assert dial is not None and dial.text == "+15550100110"
    assert [e.data for e in writer.events("twilio_transfer")] == [{"outcome": "completed"}]
    assert writer.events("twilio_hangup") == []


async def test_a_transfer_twilio_refuses_still_ends_the_call(twilio, writer):
    session = make_session(writer)
    session.transfer_to = "+15550100110"
    twilio.answer_status = 503
    serializer = await serializer_for(session, twilio.base_url)
    await serializer.serialize(EndFrame())
    assert len(twilio.requests) == 2  # the transfer, then the hang-up
    assert writer.events("twilio_transfer")[0].data["outcome"] == "failed"
    assert writer.events("twilio_hangup")[0].data["outcome"] == "failed"
