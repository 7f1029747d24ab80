"""The world model's fact extraction in the pipeline: each caller turn's facts captured.

Beside the other observers, before the context aggregator. Every final transcript
passes at once; its extraction runs in a bounded background task (rules: µs; the fast
model: up to `extraction_timeout_s`), writes `*_reported` events for the identified
caller at moderate confidence, and records an `extracted` event (kinds only, no values).
Facts heard before the caller is identified wait for the identification; `finish`
(called by the call runner after the pipeline ends) writes what is still waiting.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from loguru import logger
from pipecat.frames.frames import Frame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from call.call_session import CallSession
from lib.event_loop import BackgroundTasks
from processors.world.extraction import CallExtraction

FINISH_TIMEOUT_S = 3.0


class CallerChart(Protocol):
    """Who the caller was identified as, and the chart that shows it (the call's graph
    session keeps both)."""

    def identified_patient_id(self) -> str | None: ...

    def chart_changed(self) -> None: ...


class WorldExtractorProcessor(FrameProcessor):
    def __init__(self, session: CallSession, chart: CallerChart, capture: CallExtraction,
                 *, timeout_s: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._chart = chart
        self._capture = capture
        self._timeout_s = timeout_s
        self._turns = 0
        self._running = BackgroundTasks()  # never the processor's: they outlive a cancel

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if (isinstance(frame, TranscriptionFrame) and direction is FrameDirection.DOWNSTREAM
                and frame.text.strip()):
            self._turns += 1
            self._running.start(self._extract(frame.text, self._turns), name="extraction")

    def _patient_id(self) -> str | None:
        return self._chart.identified_patient_id()

    async def _extract(self, text: str, turn: int) -> None:
        try:
            async with asyncio.timeout(self._timeout_s + 2.0):
                written = await self._capture.capture(text, turn, self._patient_id())
        except Exception as error:  # noqa: BLE001 - a missed fact never disturbs the call
            logger.warning(f"call {self._session.call_id}: extraction failed "
                           f"({type(error).__name__})")
            self._session.log.event("extraction_failed", turn=turn, error=type(error).__name__)
            return
        kinds = sorted({fact.kind for fact, _ in self._capture.pending})
        if written or kinds:
            self._session.log.event("extracted", turn=turn, written=len(written),
                                    waiting_for_identity=kinds)
        if written:
            self._chart.chart_changed()

    async def finish(self) -> None:
        """After the call: the last extractions, then whatever still waits (unattached
        when the caller was never identified), bounded."""
        try:
            async with asyncio.timeout(FINISH_TIMEOUT_S):
                await self._running.wait()
                if self._capture.pending:
                    written = await self._capture.flush(self._patient_id())
                    self._session.log.event("extracted", turn=None, written=len(written),
                                            unattached=self._patient_id() is None)
        except Exception as error:  # noqa: BLE001 - logged; the call record still closes
            logger.warning(f"call {self._session.call_id}: extraction not finished "
                           f"({type(error).__name__})")
            self._session.log.event("extraction_failed", turn=None, error=type(error).__name__)
