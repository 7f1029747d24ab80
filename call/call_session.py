"""The typed per-call state, owned by the session and handed to the processors that need it.

One object instead of a shared dict of string keys: every field has a type and a
single writer. Everything that must reach the database goes through `CallLog`,
which stamps sequence numbers and call-relative times and hands records to the
off-path `CallRecordWriter`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from loguru import logger

from call.conversation import ConversationState
from call.identity import CallIdentity
from call.system_prompt import SystemPrompt
from call.turn_audio import TurnAudio
from call.voice_settings import VoiceSettings
from db.writer import (
    CallRecordWriter,
    CallUpdate,
    EscalationRecord,
    EventRecord,
    ToolCallRecord,
    TransitionRecord,
    TurnRecord,
)


class SessionMode(StrEnum):
    """How the caller reaches the pipeline."""

    PHONE = "phone"  # Twilio Media Streams, 8 kHz μ-law
    TEXT = "text"  # eval/RTVI text over the same WebSocket, no audio
    WEBRTC = "webrtc"  # developer runner: browser, Daily room


class CompletionReason(StrEnum):
    """Why a call ended, as stored in `calls.completion_reason`."""

    AGENT_HANGUP = "agent_hangup"
    TRANSFERRED = "transferred"
    CALLER_HANGUP = "caller_hangup"
    CALLER_DISCONNECTED = "caller_disconnected"
    MAX_DURATION = "max_duration"
    IDLE_TIMEOUT = "idle_timeout"
    CALLER_SILENT = "caller_silent"  # three unanswered check-ins
    AT_CAPACITY = "at_capacity"
    DATABASE_UNAVAILABLE = "database_unavailable"  # turned away: no row could be written
    NUMBER_NOT_IN_SERVICE = "number_not_in_service"  # turned away: no clinic owns the number
    PROTOCOL_ERROR = "protocol_error"
    START_TIMEOUT = "start_timeout"
    PIPELINE_ERROR = "pipeline_error"
    SERVER_SHUTDOWN = "server_shutdown"  # the process stopped (a drain, or its close)
    SERVER_CRASH = "server_crash"  # its process died; closed by the next start or a sweeper
    NEVER_STREAMED = "never_streamed"  # answered, but its media stream never came
    OPERATOR_ENDED = "operator_ended"  # an operator ended it (POST .../actions/end)


class CallLog:
    """Append-only call record for one call: events and turns, with seq and timing."""

    def __init__(self, call_id: str, writer: CallRecordWriter | None,
                 observe: Callable[[str, dict[str, Any]], None] | None = None, *,
                 first_event_seq: int = 1, first_seq: int = 1) -> None:
        """`observe`: sees every record (kind, fields) for live observers
        (ops/feed.CallFeed); it must never block or raise. `first_event_seq`: where a
        log opened on a finished call's record (work after the call) numbers its events,
        past the ones already there (a taken number would drop the event); `first_seq`:
        the same for every kind of record, for a call the agent takes back."""
        self.call_id = call_id
        self._writer = writer
        self.observe = observe
        self._event_seq = itertools.count(max(first_event_seq, first_seq))
        self._turn_seq = itertools.count(first_seq)
        self._transition_seq = itertools.count(first_seq)
        self._tool_seq = itertools.count(first_seq)
        self._escalation_seq = itertools.count(first_seq)
        self._started = time.monotonic()
        self.escalations = 0  # escalations recorded on this call so far

    def restart_clock(self) -> None:
        """Call time zero is when the media stream starts, not when the record was made."""
        self._started = time.monotonic()

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self._started) * 1000)

    def event(self, type_: str, **data: Any) -> None:
        """Record something that happened (failures, fallbacks, bad input). Never raises."""
        record = EventRecord(
            call_id=self.call_id, seq=next(self._event_seq), type=type_, data=data,
            at_ms=self.elapsed_ms(),
        )
        self._submit(record)
        if self.observe is not None:
            self.observe("event", {"type": type_, "data": data, "at_ms": record.at_ms})

    def escalation(self, concept: str, severity: str, *, similarity: float | None,
                   judge: str | None, reason: str | None) -> None:
        """An escalation (safety, or the time limit): on the call and in the operator queue,
        plus its event."""
        at_ms = self.elapsed_ms()
        self.escalations += 1
        self._submit(EscalationRecord(
            call_id=self.call_id, seq=next(self._escalation_seq), concept=concept,
            severity=severity, similarity=similarity, judge=judge, reason=reason, at_ms=at_ms,
        ))
        self.event("escalation", concept=concept, severity=severity, similarity=similarity,
                   judge=judge, reason=reason)

    def turn(self, **fields: Any) -> None:
        self._submit(TurnRecord(call_id=self.call_id, seq=next(self._turn_seq), **fields))
        if self.observe is not None:
            self.observe("turn", fields)

    def transition(self, previous: str | None, next_state: str, reason: str) -> None:
        """A context-graph state change, in order (the call's navigation history)."""
        self._submit(TransitionRecord(
            call_id=self.call_id, seq=next(self._transition_seq), previous_state=previous,
            next_state=next_state, reason=reason, at_ms=self.elapsed_ms(),
        ))
        if self.observe is not None:
            self.observe("transition", {"previous_state": previous, "next_state": next_state,
                                        "reason": reason})

    def tool_started(self, name: str, input_: Any) -> str:
        """A tool begins (for live observers; the record keeps it when it ends): its id,
        to hand back to `tool_call`."""
        tool_call_id = f"t{next(self._tool_seq)}"
        if self.observe is not None:
            self.observe("tool_started", {"name": name, "input": input_,
                                          "tool_call_id": tool_call_id})
        return tool_call_id

    def tool_call(
        self, name: str, input_: Any, output: Any, *, tool_call_id: str, started_ms: int,
        duration_ms: int, error_class: str | None = None, error_message: str | None = None,
    ) -> None:
        """One tool call and its result; `error_class` is guard (the graph refused it), pms
        (the practice system failed), timeout (a write not confirmed in time) or other.
        `tool_call_id`: the one `tool_started` gave."""
        self._submit(ToolCallRecord(
            call_id=self.call_id, tool_call_id=tool_call_id, name=name, input=input_,
            output=output, started_ms=started_ms, duration_ms=duration_ms,
            succeeded=error_class is None, error_class=error_class, error_message=error_message,
        ))
        if self.observe is not None:
            self.observe("tool_call", {"name": name, "tool_call_id": tool_call_id,
                                       "output": output, "duration_ms": duration_ms,
                                       "error_class": error_class,
                                       "error_message": error_message})

    def update_call(self, **fields: Any) -> None:
        self._submit(CallUpdate(call_id=self.call_id, fields=fields))

    def _submit(self, record: Any) -> None:
        if self._writer is None:
            logger.debug(f"call {self.call_id}: no writer, dropping {type(record).__name__}")
            return
        self._writer.submit(record)


@dataclass
class CallSession:
    """Everything the pipeline needs to know about one call."""

    identity: CallIdentity
    mode: SessionMode
    log: CallLog
    clinic_name: str = "the clinic"
    greeting: str = ""
    call_sid: str | None = None
    keyterms: list[str] = field(default_factory=list)
    voice: VoiceSettings = field(default_factory=VoiceSettings)
    config_snapshot: dict[str, Any] = field(default_factory=dict)
    # Why the call ends: written by `end_as` and the methods below alone (the first
    # reason stands; a goodbye cut short by a barge-in calls it off).
    completion_reason: CompletionReason | None = None
    # Where to put the caller through once the goodbye has played (instead of hanging up).
    transfer_to: str | None = None
    transfer_why: str | None = None  # who asked: a graph state, `operator`, `safety_escalation`
    caller_hung_up: bool = False
    bad_messages: int = 0
    # What the observer layers share: goodbye, suspension, the conversation so far.
    conversation: ConversationState = field(default_factory=ConversationState)
    # The engage LLM's system instruction, with the blocks layers keep current.
    instruction: SystemPrompt = field(default_factory=SystemPrompt)
    # The caller's last turn as audio (audio sessions), for audio verification.
    turn_audio: TurnAudio = field(default_factory=TurnAudio)

    @property
    def call_id(self) -> str:
        return self.identity.call_id

    @property
    def workspace_id(self) -> str | None:
        return self.identity.workspace_id

    @property
    def service_id(self) -> str | None:
        return self.identity.service_id

    @property
    def caller_number(self) -> str | None:
        """Who is calling (for identifying them), never logged."""
        return self.identity.caller_number

    def end_as(self, reason: CompletionReason) -> bool:
        """Why the call ends, unless a reason was given already (the first one stands);
        whether this one was taken."""
        if self.completion_reason is not None:
            return False
        self.completion_reason = reason
        return True

    def end_called_off(self, reason: CompletionReason) -> None:
        """An end that was about to happen will not (a barge-in cut the goodbye short)."""
        if self.completion_reason is reason:
            self.completion_reason = None

    def request_transfer(self, number: str, *, why: str) -> bool:
        """Put the caller through to `number` once the last line has played, unless a
        transfer is agreed already; whether this request was taken."""
        if self.transfer_to is not None:
            return False
        self.transfer_to = number
        self.transfer_why = why
        self.log.event("transfer_requested", state=why)
        return True

    def count_bad_message(self) -> int:
        """One more bad message on the media stream; how many so far."""
        self.bad_messages += 1
        return self.bad_messages

    def stream_stopped(self) -> str:
        """Twilio stopped the stream: the caller hung up."""
        self.caller_hung_up = True
        return CompletionReason.CALLER_HANGUP.value

    def end_for_bad_messages(self) -> str | None:
        """Too many bad messages end the call as a protocol error, unless it is already
        ending for another reason."""
        if not self.end_as(CompletionReason.PROTOCOL_ERROR):
            return None
        return CompletionReason.PROTOCOL_ERROR.value

    def cancel_transfer(self, why: str) -> None:
        """A transfer that waits for the goodbye is called off (a barge-in, an operator
        joining); the call goes on with the agent."""
        if self.transfer_to is None:
            return
        self.transfer_to = None
        self.end_called_off(CompletionReason.TRANSFERRED)
        self.log.event("transfer_cancelled", why=why)

    @property
    def is_audio(self) -> bool:
        return self.mode is not SessionMode.TEXT
