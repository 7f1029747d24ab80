"""Operator actions on a running call: end it, take it over from the agent, give it back.

The API pod that receives an action sends an `OperatorCommand` over the bus to the pod
running the call (the registry says which); there `CallControl.apply` acts on the call:

- end: a spoken goodbye, then `EndCallFrame(operator_ended)` (as the duration limit
  ends a call: queued at the pipeline's source so the goodbye is synthesized first);
- take-over: the agent is suspended exactly as a hard safety escalation suspends it
  (`conversation.suspended`, which `AgentGateProcessor` enforces), a short line says a person is
  joining, and with Twilio credentials and `HUMAN_TRANSFER_NUMBER` the call is put
  through (`session.transfer_to`, dialled by the serializer after the line plays);
- release: the agent answers again (not once a transfer is under way: the call is
  already ending to be put through);
- escalation (internal, from the control plane): an operator acknowledged or resolved
  one of the call's escalations; an `escalation_update` event in the record, which
  observers see as an `escalation` event with its new status.

The first three are each an `operator_action` event in the call record, which
observers see too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger
from pipecat.frames.frames import Frame, InterruptionFrame, TTSSpeakFrame

from call.call_session import CallSession, CompletionReason
from call.frames import EndCallFrame
from lib.prompts import render_prompt

if TYPE_CHECKING:
    from pipecat.pipeline.worker import PipelineWorker


class OperatorAction(StrEnum):
    END = "end"
    TAKE_OVER = "take-over"
    RELEASE = "release"
    # Not asked of the call: one of its escalations was acknowledged or resolved in the
    # control plane (api/control.py). Sent to the pod running the call like an action,
    # so the call's own feed numbers the observer event and its record keeps it.
    ESCALATION = "escalation"


# What `POST /api/calls/{id}/actions/{action}` accepts (ESCALATION is internal).
CallAction = Literal["end", "take-over", "release"]
# The fields of an escalation change, as recorded (`escalation_update`) and observed.
ESCALATION_FIELDS = ("escalation_id", "concept", "severity", "status", "operator")


@dataclass(frozen=True)
class OperatorCommand:
    """One operator action for one call, as it travels between pods (`data`: the
    action's details; an escalation change's `ESCALATION_FIELDS`)."""

    call_id: str
    workspace_id: str
    action: OperatorAction
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, raw: str | bytes) -> OperatorCommand:
        """Raises ValueError for anything that is not a command."""
        try:
            value = json.loads(raw)
            return cls(call_id=str(value["call_id"]), workspace_id=str(value["workspace_id"]),
                       action=OperatorAction(value["action"]),
                       data=dict(value.get("data") or {}))
        except (KeyError, TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"not an operator command ({type(error).__name__})") from error


def escalation_command(workspace_id: str, escalation: dict[str, Any], *, status: str,
                       operator: str) -> OperatorCommand:
    """The command telling a running call that an operator changed one of its
    escalations (`escalation`: its row, as `db/control.get_escalation` reads it)."""
    data = {"escalation_id": escalation["id"], "concept": escalation["concept"],
            "severity": escalation["severity"], "status": status, "operator": operator}
    return OperatorCommand(call_id=str(escalation["call_id"]), workspace_id=workspace_id,
                           action=OperatorAction.ESCALATION, data=data)


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
        elif action is OperatorAction.ESCALATION:
            self._escalation_changed(command.data)
        else:
            self._release()

    def _escalation_changed(self, data: dict[str, Any]) -> None:
        """In the record and, through the call's feed, to its observers (`escalation`)."""
        self._session.log.event("escalation_update",
                                **{key: data.get(key) for key in ESCALATION_FIELDS})

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
        conversation.suspend()
        transfer = self._transfer_number if self._session.transfer_to is None else None
        self._session.log.event("operator_action", action=OperatorAction.TAKE_OVER.value,
                                outcome="suspended", transfer=transfer is not None)
        frames: list[Frame] = [InterruptionFrame(),
                               TTSSpeakFrame(render_prompt("operator/joining.txt"))]
        if transfer is not None and self._session.request_transfer(transfer, why="operator"):
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
        conversation.resume()
        self._session.log.event("operator_action", action=OperatorAction.RELEASE.value,
                                outcome="resumed")

    async def _queue(self, frames: list[Frame]) -> None:
        """At the pipeline's source, like the duration limit's goodbye."""
        await self._worker.queue_frames(frames)
