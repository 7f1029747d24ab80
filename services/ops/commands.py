"""Operator actions on a running call: end it, take it over from the agent, give it back.

The API pod that receives an action sends an `OperatorCommand` over the bus to the pod
running the call (the registry says which); there `CallControl.apply` acts on the call:

- end: a spoken goodbye, then `EndCallFrame(operator_ended)` (as the duration limit
  ends a call: queued at the pipeline's source so the goodbye is synthesized first);
- take-over: the agent is suspended exactly as a hard safety escalation suspends it
  (`conversation.suspended`, which `AgentGate` enforces), a short line says a person is
  joining, and with Twilio credentials and `HUMAN_TRANSFER_NUMBER` the call is put
  through (`session.transfer_to`, dialled by the serializer after the line plays);
- release: the agent answers again (not once a transfer is under way: the call is
  already ending to be put through).

Each is an `operator_action` event in the call record, which observers see too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from loguru import logger
from pipecat.frames.frames import Frame, InterruptionFrame, TTSSpeakFrame

from processors.frames import EndCallFrame
from services.call_session import CallSession, CompletionReason
from services.prompts import render_prompt

if TYPE_CHECKING:
    from pipecat.pipeline.worker import PipelineWorker


class OperatorAction(StrEnum):
    END = "end"
    TAKE_OVER = "take-over"
    RELEASE = "release"


@dataclass(frozen=True)
class OperatorCommand:
    """One operator action for one call, as it travels between pods."""

    call_id: str
    workspace_id: str
    action: OperatorAction

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> OperatorCommand:
        """Raises ValueError for anything that is not a command."""
        try:
            value = json.loads(raw)
            return cls(call_id=str(value["call_id"]), workspace_id=str(value["workspace_id"]),
                       action=OperatorAction(value["action"]))
        except (KeyError, TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"not an operator command ({type(error).__name__})") from error


class CallControl:
    """Applies operator commands to one running call (registered by `run_call`)."""

    def __init__(self, session: CallSession, worker: PipelineWorker, *,
                 transfer_number: str | None) -> None:
        """`transfer_number`: where a taken-over call is put through (None: held on the
        line for the operator; only given when Twilio credentials exist)."""
        self._session = session
        self._worker = worker
        self._transfer_number = transfer_number

    async def apply(self, command: OperatorCommand) -> None:
        action = command.action
        if action is OperatorAction.END:
            await self._end()
        elif action is OperatorAction.TAKE_OVER:
            await self._take_over()
        else:
            self._release()

    async def _end(self) -> None:
        self._session.log.event("operator_action", action=OperatorAction.END.value)
        logger.info(f"call {self._session.call_id}: ended by an operator")
        await self._queue([
            InterruptionFrame(), TTSSpeakFrame(render_prompt("operator/goodbye.txt")),
            EndCallFrame(reason=CompletionReason.OPERATOR_ENDED.value),
        ])

    async def _take_over(self) -> None:
        conversation = self._session.conversation
        if conversation.suspended:
            self._session.log.event("operator_action", action=OperatorAction.TAKE_OVER.value,
                                    outcome="already_suspended")
            return
        conversation.suspended = True
        transfer = self._transfer_number if self._session.transfer_to is None else None
        self._session.log.event("operator_action", action=OperatorAction.TAKE_OVER.value,
                                outcome="suspended", transfer=transfer is not None)
        frames: list[Frame] = [InterruptionFrame(),
                               TTSSpeakFrame(render_prompt("operator/joining.txt"))]
        if transfer is not None:
            self._session.transfer_to = transfer  # dialled after the line plays
            self._session.log.event("transfer_requested", state="operator")
            frames.append(EndCallFrame(reason=CompletionReason.TRANSFERRED.value))
        await self._queue(frames)

    def _release(self) -> None:
        conversation = self._session.conversation
        if not conversation.suspended:
            self._session.log.event("operator_action", action=OperatorAction.RELEASE.value,
                                    outcome="not_suspended")
            return
        if self._session.transfer_to is not None:
            # The call ends to be put through (its end is queued): too late to give it back.
            self._session.log.event("operator_action", action=OperatorAction.RELEASE.value,
                                    outcome="transfer_in_progress")
            return
        conversation.suspended = False
        conversation.escalated_on = None
        self._session.log.event("operator_action", action=OperatorAction.RELEASE.value,
                                outcome="resumed")

    async def _queue(self, frames: list[Frame]) -> None:
        """At the pipeline's source, like the duration limit's goodbye."""
        await self._worker.queue_frames(frames)
