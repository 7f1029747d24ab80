import pytest

from services.call_session import CallLog, CallSession, SessionMode
from tests.fakes import CollectingWriter


@pytest.fixture
def writer() -> CollectingWriter:
    return CollectingWriter()


def make_session(writer: CollectingWriter, mode: SessionMode = SessionMode.PHONE) -> CallSession:
    return CallSession(
        call_id="call-1", mode=mode, log=CallLog("call-1", writer), clinic_name="Riverside Clinic"
    )


@pytest.fixture
def session(writer) -> CallSession:
    return make_session(writer)
