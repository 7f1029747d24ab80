"""Deepgram's live recognizer, reopened by the call's own policy when its stream fails.

Pipecat's `DeepgramSTTService` waits at least 4 s before each new connection and keeps
trying for as long as connections last a few seconds, while the caller's words spoken
meanwhile are dropped. Here the connection loop alone is replaced (how a connection is
opened, listened to and kept alive stays Pipecat's):

- a stream that drops, closes, or sends what does not parse is reopened after
  `ReconnectPolicy.delay` (0.25 s, 0.5 s, 1 s), at most `tries` times in a row;
- the caller audio no final result has covered is sent again on the new stream, then
  the `Finalize` still owed, so nothing said during the outage is lost;
- a turn whose final transcript has not come `final_timeout_s` after it ended counts
  as a stalled stream and is reopened the same way;
- once the tries are spent the service reports itself unable to work
  (`force_treat_as_permanent`), which the call's STT switcher answers by moving to the
  offline recognizer (pipeline/stt_failover.py).

Each of these leaves an event in the call record (`stt_reconnect`, `stt_recovered`,
`stt_malformed`, `stt_slow_first_byte`, `stt_failed`).
"""

from __future__ import annotations

import asyncio
import time

from deepgram.core import ApiError
from deepgram.core.events import EventType
from deepgram.listen.v1.types import ListenV1Finalize, ListenV1Results
from loguru import logger
from pipecat.frames.frames import Frame, VADUserStoppedSpeakingFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.deepgram.stt import DeepgramSTTService

from services.provider_faults import (
    FaultSink,
    ReconnectBudget,
    ReconnectPolicy,
    UnconfirmedAudio,
    ignore_faults,
)

FINAL_TIMEOUT_S = 1.5
REPLAY_CHUNK_S = 0.5
CANCEL_TIMEOUT_S = 1.0


class _Rejected(Exception):
    """Deepgram refused the request itself (a 4xx at the handshake): retrying cannot help."""


class ReconnectingDeepgramSTTService(DeepgramSTTService):
    """`DeepgramSTTService` whose stream is reopened by `policy`, losing no caller audio."""

    def __init__(
        self, *, policy: ReconnectPolicy | None = None, final_timeout_s: float = FINAL_TIMEOUT_S,
        faults: FaultSink = ignore_faults, **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._policy = policy or ReconnectPolicy()
        self._budget = ReconnectBudget(self._policy)
        self._final_timeout_s = final_timeout_s
        self._faults = faults
        self._kept: UnconfirmedAudio | None = None
        self._connected_at: float | None = None
        self._last_error: BaseException | None = None
        self._finalize_owed = False
        self._final_watch: asyncio.Task | None = None
        self._restart_after: tuple[float, str] | None = None
        self._closing = False  # the call is ending: a closed stream is not a fault

    # --- The connection loop ------------------------------------------------------------

    async def _connection_handler(self) -> None:
        """Connections one after another until the stream works or the tries are spent."""
        try:
            if self._restart_after is not None:
                uptime, cause = self._restart_after
                self._restart_after = None
                if not await self._wait_to_retry(uptime, cause):
                    return
            while True:
                uptime, cause = await self._one_connection()
                if not await self._wait_to_retry(uptime, cause):
                    return
        except _Rejected:
            return
        finally:
            self._connection_settled.set()

    async def _one_connection(self) -> tuple[float, str]:
        """Open, resume and listen to one connection; how long it lasted and why it ended."""
        keepalive = None
        self._connected_at, self._last_error = None, None
        cause = "unreachable"
        try:
            async with self._client.listen.v1.connect(**self._build_connect_kwargs()) as link:
                self._connected_at = time.monotonic()
                link.on(EventType.MESSAGE, self._on_message)
                link.on(EventType.ERROR, self._on_error)
                await self._resume(link)
                self._connection_settled.set()
                keepalive = self.create_task(self._keepalive_handler(), f"{self}::keepalive")
                await link.start_listening()
            cause = "malformed" if isinstance(self._last_error, ValueError) else (
                "dropped" if self._last_error is not None else "closed")
        except ApiError as error:
            if error.status_code is not None and 400 <= error.status_code < 500:
                self._faults("stt_failed", tries=0, cause=f"rejected ({error.status_code})")
                await self.push_error(error_msg=f"Deepgram rejected the connection "
                                      f"({error.status_code})", exception=error,
                                      force_treat_as_permanent=True)
                raise _Rejected from error
            cause = f"refused ({error.status_code})"
        except Exception as error:  # noqa: BLE001 - any failure is a drop to recover from
            cause = type(error).__name__
        finally:
            self._connection = None
            if keepalive is not None:
                await self.cancel_task(keepalive)
        uptime = time.monotonic() - self._connected_at if self._connected_at else 0.0
        return uptime, cause

    async def _wait_to_retry(self, uptime_s: float, cause: str) -> bool:
        """After a failed or ended stream: wait for the next try (True), or give up."""
        if self._closing:
            return False
        attempt = self._budget.next_try(uptime_s)
        if attempt is None:
            logger.warning(f"{self}: stream lost ({cause}); {self._policy.tries} tries spent")
            self._faults("stt_failed", tries=self._policy.tries, cause=cause)
            await self.push_error(error_msg=f"Deepgram stream lost ({cause}) and not reopened "
                                  f"after {self._policy.tries} tries",
                                  force_treat_as_permanent=True)
            return False
        delay = self._policy.delay(attempt)
        logger.info(f"{self}: stream lost ({cause}); try {attempt} in {delay:.2f} s")
        self._faults("stt_reconnect", attempt=attempt, wait_ms=int(delay * 1000), cause=cause)
        await asyncio.sleep(delay)
        return True

    async def _resume(self, link) -> None:
        """A new stream hears the unconfirmed audio first, then any Finalize still owed;
        only then does live audio go to it."""
        kept = self._kept_audio()
        position = kept.new_stream()
        replayed = 0
        step = int(REPLAY_CHUNK_S * kept.bytes_per_s)
        while chunk := kept.since(position)[:step]:
            await link.send_media(chunk)
            position += len(chunk)
            replayed += len(chunk)
        self._connection = link
        if self._finalize_owed:
            self.request_finalize()
            await link.send_finalize(ListenV1Finalize(type="Finalize"))
            self._watch_final()
        if self._budget.attempt:
            self._faults("stt_recovered", tries=self._budget.attempt,
                         replayed_ms=int(replayed * 1000 / kept.bytes_per_s))

    async def _restart(self, cause: str) -> None:
        """Drop the current stream now and reopen it by the policy."""
        uptime = time.monotonic() - self._connected_at if self._connected_at else 0.0
        old, self._connection = self._connection_task, None
        self._restart_after = (uptime, cause)
        self._connection_settled.clear()
        self._connection_task = self.create_task(self._connection_handler())
        if old is not None:
            await self.cancel_task(old, timeout=CANCEL_TIMEOUT_S)

    # --- Audio and results ----------------------------------------------------------------

    def _kept_audio(self) -> UnconfirmedAudio:
        if self._kept is None:
            self._kept = UnconfirmedAudio(self.sample_rate or 16000)
        return self._kept

    async def run_stt(self, audio: bytes):
        """Keep the audio until a final result covers it; send it if the stream is up."""
        self._kept_audio().add(audio)
        if self._connection:
            try:
                await self._connection.send_media(audio)
            except Exception as error:  # noqa: BLE001 - the listener sees the drop and reopens
                logger.debug(f"{self}: audio not sent ({type(error).__name__}); kept")
        yield None

    async def _on_message(self, message) -> None:
        await super()._on_message(message)
        if not isinstance(message, ListenV1Results) or not message.is_final:
            return
        self._budget.proved()
        self._kept_audio().confirm_until(float(message.start) + float(message.duration))
        if getattr(message, "from_finalize", False):
            self._finalize_owed = False
            await self._stop_watching_final()

    async def _on_error(self, error) -> None:
        self._last_error = error
        if isinstance(error, ValueError):
            self._faults("stt_malformed", error=type(error).__name__)
        await super()._on_error(error)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if not isinstance(frame, VADUserStoppedSpeakingFrame):
            await super().process_frame(frame, direction)
            return
        self._finalize_owed = True  # sent now, or on the next stream if this one is down
        try:
            await super().process_frame(frame, direction)
        except Exception as error:  # noqa: BLE001 - the stream just died: the next one gets it
            logger.debug(f"{self}: Finalize not sent ({type(error).__name__}); owed")
        self._watch_final()

    # --- A final result that does not come ---------------------------------------------

    def _watch_final(self) -> None:
        if self._final_watch is None or self._final_watch.done():
            self._final_watch = self.create_task(self._await_final(), f"{self}::final-watch")

    async def _stop_watching_final(self) -> None:
        watch, self._final_watch = self._final_watch, None
        if watch is not None and watch is not asyncio.current_task():
            await self.cancel_task(watch)

    async def _await_final(self) -> None:
        await asyncio.sleep(self._final_timeout_s)
        self._final_watch = None
        if self._finalize_owed and self._connection is not None:
            self._faults("stt_slow_first_byte", after_ms=int(self._final_timeout_s * 1000))
            await self._restart("slow")

    async def _connect(self) -> None:
        self._closing = False
        await super()._connect()

    async def _disconnect(self) -> None:
        self._closing = True
        await self._stop_watching_final()
        await super()._disconnect()
