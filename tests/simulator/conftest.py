"""Fixtures for the call simulator: a fake service to call, and a stand-in caller voice."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from tests.simulator.fake_service import FakeAgent, FakeVoiceService, serving

TOKEN = "0123456789abcdef0123456789abcdef"
API_KEY = "sim-test-key"
SECONDS_PER_WORD = 0.15


async def tone_voice(text: str, sample_rate: int) -> bytes:
    """Stands in for espeak: a tone as long as the words would take (PCM16 mono)."""
    count = int(len(text.split()) * SECONDS_PER_WORD * sample_rate)
    return b"".join(
        struct.pack("<h", int(6000 * math.sin(2 * math.pi * 300 * i / sample_rate)))
        for i in range(count)
    )


def spoken_seconds(text: str) -> float:
    return len(text.split()) * SECONDS_PER_WORD


@pytest.fixture
def fake_service() -> Iterator[Callable[..., tuple[FakeVoiceService, str]]]:
    """Start fake services on demand: `service, url = fake_service(agent=FakeAgent(...))`."""
    with ExitStack() as stack:

        def start(
            agent: FakeAgent | None = None, token: str = TOKEN, **kwargs
        ) -> tuple[FakeVoiceService, str]:
            service = FakeVoiceService(token=token, api_key=API_KEY, agent=agent, **kwargs)
            return service, stack.enter_context(serving(service.app))

        yield start


@pytest.fixture
def write_script(tmp_path: Path) -> Callable[[dict], Path]:
    def write(data: dict, name: str = "script.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
