import pytest

from tests.fakes import CollectingWriter
from tests.processors.conftest import make_session


@pytest.fixture
def writer() -> CollectingWriter:
    return CollectingWriter()


@pytest.fixture
def session(writer):
    return make_session(writer)
