"""The user turn start strategy that makes barge-in semantic (Pipecat turn strategy).

It replaces the VAD and transcription start strategies in the user aggregator. While
the agent is silent it starts the caller's turn as they did (voice activity or words);
while the agent speaks it follows `turns/barge_in.BargeInRule`: words and
0.5 s of speech, or 1.0 s of continuous speech, and only then the turn starts — with
the interruption that stops the agent. Each barge-in counts in `conversation.barge_ins`
and is a `barge_in` event.

Words under the agent's voice that do not take the floor are read with
`turns/deferred_turns`: backchannels ("mm-hm", "okay", "right") are dropped
from the aggregation and never become a turn — nor take the floor, however long they go
on; an early answer ("yes", "Tuesday", "mm no") is kept, dropped from the aggregation
for now, and written back as the start of the caller's turn once the agent has finished:
on its own after `settle_s` of silence, joined with the caller's next words when they
speak first, or replaced by them when those words take it back. Kept answers said over
an earlier reply, too old, or pending when the call ends or is handed over expire. Each
step is a `deferred_turn` event (deferred / answered / coalesced / expired, with counts
and ages, never the words).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start.base_user_turn_start_strategy import BaseUserTurnStartStrategy
from pipecat.utils.time import time_now_iso8601

from call.call_session import CallSession
from turns.barge_in import BargeIn, BargeInRule
from turns.deferred_turns import (
    DeferredTurns,
    Expiry,
    OverlapWords,
    Taken,
    overlap_words,
)

POLL_S = 0.05


@dataclass
class _Answering:
    """A turn that began with kept words, until the caller's next words say whether
    they join it or replace it."""

    taken: Taken
    decided: bool = False


class SemanticBargeInUserTurnStartStrategy(BaseUserTurnStartStrategy):
    def __init__(self, session: CallSession, *, rule: BargeInRule | None = None,
                 deferred: DeferredTurns | None = None, words: OverlapWords | None = None,
                 poll_s: float = POLL_S, **kwargs) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._rule = rule or BargeInRule()
        self._deferred = deferred or DeferredTurns()
        self._words = words or overlap_words()
        self._poll_s = poll_s
        self._bot_speaking = False
        self._watch: asyncio.Task | None = None
        self._overlap: list[str] = []  # final words of the speech under the agent's voice
        self._latest = ""  # the latest words of that speech (interim or final)
        self._user_id = ""
        self._written: set[int] = set()  # transcription frames this strategy wrote back
        self._answering: _Answering | None = None

    async def setup(self, setup: FrameProcessorSetup):
        await super().setup(setup)
        self._watch = self.task_manager.create_task(self._watch_speech(), f"{self}::watch")

    async def cleanup(self):
        await super().cleanup()
        if self._watch is not None:
            await self.task_manager.cancel_task(self._watch)
            self._watch = None

    async def handle_user_turn_started(self):
        self._rule.reset()
        self._overlap, self._latest = [], ""

    async def handle_user_turn_stopped(self):
        answering, self._answering = self._answering, None
        if answering is not None and not answering.decided:
            self._record("answered", fragments=answering.taken.fragments,
                         age_s=answering.taken.age_s)

    async def process_frame(self, frame: Frame) -> ProcessFrameResult:
        now = self._session.conversation.clock()
        if isinstance(frame, TranscriptionFrame) and frame.id in self._written:
            self._written.discard(frame.id)  # our own write-back: already decided
            return ProcessFrameResult.CONTINUE
        if isinstance(frame, BotStartedSpeakingFrame):
            self._bot_speaking = True
            self._rule.reset()
            self._expired(self._deferred.agent_started(
                now, self._session.conversation.agent_replies))
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._bot_speaking = False
            self._deferred.agent_stopped(now)
            if self._deferred.pending and self._caller_speaking():
                await self._open_turn(now, interrupt=False)  # they go on: one turn
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            if not self._bot_speaking:
                await self._open_turn(now, interrupt=True)
                return ProcessFrameResult.STOP
            self._rule.speech_started(now)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._rule.speech_stopped(now)
            if self._overlap:  # words begun under the agent's voice, not a turn (yet)
                await self._overlap_ended(now)
        elif isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            if not frame.text.strip():
                return ProcessFrameResult.CONTINUE
            return await self._heard(frame, now)
        return ProcessFrameResult.CONTINUE

    async def _heard(self, frame: TranscriptionFrame | InterimTranscriptionFrame,
                     now: float) -> ProcessFrameResult:
        final = isinstance(frame, TranscriptionFrame)
        self._user_id = frame.user_id or self._user_id
        if not self._bot_speaking:
            if final:
                self._overlap.append(frame.text)
            await self._open_turn(now, interrupt=True)
            if final and self._answering is not None and not self._answering.decided:
                await self._next_words([frame.text])
            return ProcessFrameResult.STOP
        if final:
            self._overlap.append(frame.text)
            self._latest = " ".join(self._overlap)
        else:
            self._latest = " ".join([*self._overlap, frame.text])
        decision = self._rule.heard_words(now)
        if decision is not None and not self._words.is_backchannel(self._latest):
            await self._barge_in(decision, now)
            return ProcessFrameResult.STOP
        if final and not self._caller_speaking():
            await self._overlap_ended(now)
        return ProcessFrameResult.CONTINUE

    def _caller_speaking(self) -> bool:
        return self._rule.started is not None and self._rule.stopped is None

    async def _overlap_ended(self, now: float) -> None:
        """The speech under the agent's voice ended without taking the floor: its words
        leave the aggregation; a backchannel is forgotten, an early answer kept."""
        finals, said = len(self._overlap), " ".join(self._overlap)
        self._overlap, self._latest = [], ""
        await self.trigger_reset_aggregation()
        conversation = self._session.conversation
        if self._words.is_backchannel(said):
            conversation.not_a_turn(finals)
            return
        if (why := self._no_turn_now()) is not None:
            self._record("expired", why=why, fragments=1, age_s=0.0)
            return
        self._expired(self._deferred.keep(said, now, conversation.agent_replies))
        self._record("deferred", words=len(said.split()),
                     speech_s=round(self._rule.speech_s(now), 2),
                     pending=len(self._deferred.pending))

    def _no_turn_now(self) -> str | None:
        """Why no caller turn would be answered now (the call ends, a person takes it)."""
        session = self._session
        if session.conversation.suspended:
            return "held"
        if session.completion_reason is not None or session.conversation.goodbye_in_progress:
            return "call_ending"
        return None

    async def _open_turn(self, now: float, *, interrupt: bool) -> None:
        """Start the caller's turn; kept answers, if any, go in first, ahead of the words
        of this speech already in the aggregation."""
        taken = None
        if self._deferred.pending:
            if (why := self._no_turn_now()) is not None:
                self._expired(self._deferred.drop(now, why))
            else:
                taken, expired = self._deferred.take(
                    now, self._session.conversation.agent_replies)
                for expiry in expired:
                    self._expired(expiry)
        after, self._overlap, self._latest = self._overlap, [], ""
        if taken is None:
            await self.trigger_user_turn_started(enable_interruptions=interrupt)
            return
        if after:
            await self.trigger_reset_aggregation()  # written back below, in order
        await self.trigger_user_turn_started(enable_interruptions=interrupt)
        self._answering = _Answering(taken)
        if after and self._words.replaces(after[0]):
            await self._next_words(after, written=False)
            return
        await self._write_back(taken.text)
        if after:
            await self._next_words(after, written=False)

    async def _next_words(self, texts: list[str], *, written: bool = True) -> None:
        """The caller's first words after kept ones: they replace them when they take them
        back ("no, Wednesday"), else the turn holds both. `written`: the words are in the
        aggregation already, after the kept ones."""
        answering = self._answering
        if answering is None or answering.decided:
            return
        answering.decided = True
        taken = answering.taken
        if self._words.replaces(texts[0]):
            if written:
                await self.trigger_reset_aggregation()
            for text in texts:
                await self._write_back(text)
            self._record("expired", why="superseded", fragments=taken.fragments,
                         age_s=taken.age_s)
            return
        if not written:
            for text in texts:
                await self._write_back(text)
        self._record("coalesced", fragments=taken.fragments, age_s=taken.age_s)

    async def _write_back(self, text: str) -> None:
        """Into the aggregation, as the caller's words (this strategy skips it)."""
        frame = TranscriptionFrame(text=text, user_id=self._user_id, timestamp=time_now_iso8601())
        self._written.add(frame.id)
        await self.push_frame(frame)

    async def _watch_speech(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            now = self._session.conversation.clock()
            if self._deferred.pending and (why := self._no_turn_now()) is not None:
                self._expired(self._deferred.drop(now, why))
            if not self._bot_speaking:
                if self._deferred.due(now):
                    await self._open_turn(now, interrupt=False)
                continue
            decision = self._rule.tick(now)
            if decision is not None and not (self._latest
                                             and self._words.is_backchannel(self._latest)):
                await self._barge_in(decision, now)

    async def _barge_in(self, how: BargeIn, now: float) -> None:
        speech_s = round(self._rule.speech_s(now), 2)
        self._rule.reset()
        self._bot_speaking = False  # the interruption stops the agent
        conversation = self._session.conversation
        conversation.barge_ins += 1
        self._session.log.event("barge_in", how=how, speech_s=speech_s,
                                count=conversation.barge_ins)
        await self._open_turn(now, interrupt=True)

    def _expired(self, expiry: Expiry | None) -> None:
        if expiry is not None:
            self._record("expired", why=expiry.why, fragments=expiry.fragments,
                         age_s=expiry.age_s)

    def _record(self, action: str, **data) -> None:
        self._session.log.event("deferred_turn", action=action, **data)
