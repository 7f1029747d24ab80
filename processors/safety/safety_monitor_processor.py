"""The safety monitor: every caller turn checked against the safety concepts, escalated
when it must be, without ever holding up the voice path.

Between the STT and the user aggregator. Each final transcript is passed on first; its
check runs in the background:

0. Rules: a quick-observer pattern that names a concept (a farewell said because the
   caller means to harm themselves) escalates that concept at once, with no embedding
   and no judge — so it holds when both are down.
1. Stage 1: the turn is embedded and compared with every concept (the defaults, always
   active, plus the workspace's own). At or above the escalation similarity (0.85) it
   escalates at once, without waiting for the judge — so safety holds when the judge is
   down; the judge still runs afterwards, for the record.
2. Stage 2: nearer than the candidate similarity, the judge (the fast model, or the
   concepts' rules offline) confirms or not. No verdict (timeout, error) means no
   escalation from this stage, recorded.

An escalation is written on the call and for the operator queue (`escalations`) with an
`escalation` event. A hard one suspends the AI agent: what it was saying is cut off, it
says one holding line (the emergency number from the settings, a crisis line only if one
was configured), and from then on the agent gate lets no turn reach the LLM or the
navigator; the call waits for a human — or, with a transfer number, is put through once
the line has played. A soft one adds safety guidance for the LLM and the call goes on.
"""

from __future__ import annotations

import asyncio
import time

from loguru import logger
from pipecat.frames.frames import Frame, TranscriptionFrame
from pipecat.processors.frame_processor import FrameDirection

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from config import CrisisResource
from processors.conversation.quick_rules import QuickRules, quick_rules
from processors.llm_context import guidance_message
from processors.safety.concepts import ConceptIndex, Nearness, SafetyConcept
from processors.safety.monitor import (
    SafetyServices,
    concepts_named_by,
    holding_line,
    soft_guidance,
)
from processors.voice.line_speaker_processor import LineSpeakerProcessor


class SafetyMonitorProcessor(LineSpeakerProcessor):
    def __init__(
        self, session: CallSession, services: SafetyServices, *,
        escalate_at: float = 0.85, candidate_at: float = 0.45, judge_timeout_s: float = 3.0,
        emergency_number: str = "911", crisis_resources: list[CrisisResource] | None = None,
        transfer_number: str | None = None, index: ConceptIndex | None = None,
        rules: QuickRules | None = None, **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._session = session
        self._rules = rules or quick_rules()
        self._rule_concepts = concepts_named_by(self._rules)
        self._services = services
        self._escalate_at = escalate_at
        self._candidate_at = candidate_at
        self._judge_timeout_s = judge_timeout_s
        self._emergency_number = emergency_number
        self._crisis_resources = crisis_resources or []
        self._transfer_number = transfer_number
        self._index = index
        self._escalated: set[str] = set()
        self._checks: set[asyncio.Task] = set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if (isinstance(frame, TranscriptionFrame) and direction is FrameDirection.DOWNSTREAM
                and frame.text.strip()):
            task = self.create_task(self._check(frame.text), name="safety-check")
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def _check(self, text: str) -> None:
        started = time.perf_counter()
        for concept in self._named_by_rules(text):
            await self._escalate(concept, text, similarity=None, judge="rules",
                                 reason="the caller's words match a safety rule")
        try:
            index = self._index or await self._services.index()
            vector = (await self._services.embedder.embed([text]))[0]
        except Exception as error:  # noqa: BLE001 - recorded; the call goes on
            logger.warning(f"call {self._session.call_id}: safety embedding failed "
                           f"({type(error).__name__})")
            self._session.log.event("safety_check", stage="embedding", error=type(error).__name__)
            return
        assessment = index.assess(vector, escalate_at=self._escalate_at,
                                  candidate_at=self._candidate_at, text=text)
        stage1_ms = round((time.perf_counter() - started) * 1000, 2)
        for near in assessment.escalate:
            await self._escalate(near.concept, text, similarity=round(near.similarity, 3),
                                 judge=None, reason="similarity above the threshold")
            if near.concept.severity == "hard":
                break
        for near in assessment.escalate:
            # After the fact, for the record: would the judge have agreed?
            verdict = await self._verdict(text, near)
            self._session.log.event("safety_check", stage="judge_after", concept=near.concept.key,
                                    similarity=round(near.similarity, 3),
                                    confirmed=None if verdict is None else verdict.confirmed)
        for near in assessment.candidates:
            if self._session.conversation.suspended:
                break  # a human is taking over: nothing more to decide
            if near.concept.key in self._escalated:
                continue
            verdict = await self._verdict(text, near)
            self._session.log.event(
                "safety_check", stage="judge", concept=near.concept.key,
                similarity=round(near.similarity, 3), stage1_ms=stage1_ms,
                confirmed=None if verdict is None else verdict.confirmed,
                judge=None if verdict is None else verdict.judge,
            )
            if verdict is not None and verdict.confirmed:
                await self._escalate(near.concept, text, similarity=round(near.similarity, 3),
                                     judge=verdict.judge, reason=verdict.reason)
                break

    async def _verdict(self, text: str, near: Nearness):
        try:
            return await asyncio.wait_for(self._services.judge.judge(text, near.concept),
                                          self._judge_timeout_s)
        except Exception as error:  # noqa: BLE001 - no verdict: only the threshold escalates
            logger.warning(f"call {self._session.call_id}: safety judge gave no verdict "
                           f"({type(error).__name__})")
            return None

    def _named_by_rules(self, text: str) -> list[SafetyConcept]:
        """The concepts this turn's quick-observer signals escalate (the quick observer's
        reading of the same words is reused)."""
        seen = self._session.conversation.last_observation
        observation = seen[1] if seen and seen[0] == text else self._rules.observe(text)
        return [self._rule_concepts[key] for key in observation.escalations]

    async def _escalate(
        self, concept: SafetyConcept, text: str, *, similarity: float | None,
        judge: str | None, reason: str,
    ) -> None:
        if concept.key in self._escalated:
            return
        self._escalated.add(concept.key)
        conversation = self._session.conversation
        self._session.log.escalation(concept.key, concept.severity, similarity=similarity,
                                     judge=judge, reason=reason)
        if concept.severity == "soft":
            await self.push_frame(guidance_message(soft_guidance(concept)))
            return
        if not conversation.suspend(on_words=text.strip()):
            return
        self._session.log.event("agent_suspended", concept=concept.key,
                                transfer=self._transfer_number is not None)
        # Whatever the agent was saying stops; then the one holding line.
        await self.broadcast_interruption()
        line = holding_line(concept, emergency_number=self._emergency_number,
                            crisis_resources=self._crisis_resources)
        await self.say_line(line, own_line=True)
        if self._transfer_number and self._session.request_transfer(
                self._transfer_number, why="safety_escalation"):
            await self.push_frame(EndCallFrame(reason=CompletionReason.TRANSFERRED.value))

    async def cleanup(self) -> None:
        await super().cleanup()
        for task in list(self._checks):
            await self.cancel_task(task)
