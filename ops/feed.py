"""One call's observer stream: CallLog records → numbered observer events → the bus.

The feed is what `CallLog` calls for every record (`CallLog(observe=feed)`). It runs on
the call's path, so it only maps, numbers and hands over (`bus.publish` never blocks)
and never raises; it keeps the call's registry entry current as it goes.
"""

from __future__ import annotations

from typing import Any

from loguru import logger

from ops.bus import EventBus
from ops.events import CallContext, ObserverEvent, observer_events
from ops.registry import CallRegistry


class CallFeed:
    def __init__(self, ctx: CallContext, bus: EventBus, registry: CallRegistry) -> None:
        self.ctx = ctx
        self._bus = bus
        self._registry = registry
        self.seq = 0  # the last event's; per call, monotonic from 1
        self._failed = False

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        """Publish what a CallLog record means to observers. Never raises."""
        try:
            for type_, data in observer_events(kind, payload, self.ctx):
                self.seq += 1
                self._bus.publish(ObserverEvent(self.ctx.call_id, self.ctx.workspace_id,
                                                self.seq, type_, data))
                self._track(type_, data)
        except Exception as error:  # noqa: BLE001 - observers never cost the call anything
            if not self._failed:  # once per call; no traceback: its locals hold transcripts
                self._failed = True
                logger.warning(f"call {self.ctx.call_id}: observer events not published "
                               f"({type(error).__name__})")

    def _track(self, type_: str, data: dict[str, Any]) -> None:
        call_id = self.ctx.call_id
        if type_ == "state_transition":
            self._registry.update(call_id, state=data.get("next_state"))
        elif type_ == "emotion":
            self._registry.update(call_id, emotion=data)
        elif type_ == "latency":
            self._registry.update(call_id, latency=data)
        elif type_ == "operator_action" and data.get("outcome") in ("suspended", "resumed"):
            self._registry.update(call_id, suspended=data["outcome"] == "suspended")
