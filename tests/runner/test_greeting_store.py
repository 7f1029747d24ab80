"""A greeting rendered by the worker process that answered a call plays at once in the
one its media stream reached: from the machine's greeting folder, without rendering it
again, even when the stream arrives while the rendering is still under way."""

from __future__ import annotations

import asyncio
import os
import stat
import time

from runner.greeting_cache import GreetingCache
from runner.greeting_store import GreetingStore
from services.espeak.engine import TimedSpeech, WordEvent

VOICE, TEXT, RATE = "espeak:en-us:175:1.0", "Thank you for calling the clinic.", 8000


class Renderer:
    """Stands in for eSpeak: renders when let go, and counts what it rendered."""

    def __init__(self) -> None:
        self.rendered: list[str] = []
        self.go = asyncio.Event()

    async def __call__(self, text: str, sample_rate: int, speed: float) -> TimedSpeech:
        await self.go.wait()
        self.rendered.append(text)
        return TimedSpeech(audio=b"\x01\x02" * 800, sample_rate=sample_rate,
                           words=(WordEvent("Thank", 0.0, 0), WordEvent("you", 0.2, 6)))


async def test_a_greeting_rendered_by_one_process_is_played_by_another_without_rendering(
        tmp_path):
    answering, streaming = Renderer(), Renderer()
    answered = GreetingCache(answering, GreetingStore(tmp_path / "greetings"))
    answering.go.set()
    answered.warm(VOICE, TEXT, RATE)
    rendered = await answered.get(VOICE, TEXT, RATE, timeout_s=2.0)
    await asyncio.sleep(0.2)  # written to disk in a thread

    played = await GreetingCache(streaming, GreetingStore(tmp_path / "greetings")).get(
        VOICE, TEXT, RATE, timeout_s=0.05)

    assert played == rendered and [start for _, start in played.words] == [0.0, 0.2]
    assert streaming.rendered == []  # nothing rendered twice
    folder = tmp_path / "greetings"
    [stored] = list(folder.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600  # it may say a callee's name
    assert TEXT.encode() not in stored.name.encode()


async def test_a_stream_that_arrives_mid_rendering_gets_the_other_process_rendering(tmp_path):
    answering, streaming = Renderer(), Renderer()
    answered = GreetingCache(answering, GreetingStore(tmp_path / "greetings"))
    answered.warm(VOICE, TEXT, RATE)  # still rendering when the stream comes
    waiting = asyncio.create_task(
        GreetingCache(streaming, GreetingStore(tmp_path / "greetings")).get(
            VOICE, TEXT, RATE, timeout_s=2.0))
    await asyncio.sleep(0.1)
    answering.go.set()  # the answering process finishes first

    played = await asyncio.wait_for(waiting, 3.0)

    assert played is not None and played.text == TEXT
    assert streaming.rendered == []


async def test_the_greeting_folder_keeps_only_the_newest_renderings(tmp_path):
    cache = GreetingCache(renderer := Renderer(), GreetingStore(tmp_path))
    renderer.go.set()
    keys = [(VOICE, f"Greeting number {number}.", RATE) for number in range(6)]
    store = GreetingStore(tmp_path, max_files=3, max_age_s=3600)
    for number, key in enumerate(keys[:5]):
        await cache.get(*key, timeout_s=2.0)
        await asyncio.sleep(0.1)  # written in a thread
        age = 7200 if number == 4 else 60.0 * (5 - number)  # the last is past the age bound
        os.utime(store.path(key), (time.time() - age, time.time() - age))

    store.prune()

    assert [store.load(key) is not None for key in keys] == [
        False, True, True, True, False, False]
