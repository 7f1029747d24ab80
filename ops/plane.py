"""The operations plane of one process: its event bus, the active-call registry, its
pod id (one per worker process).

In process for a single process; through Redis when `REDIS_URL` is set, so that any pod
lists, observes and commands the calls of every pod; through PostgreSQL (LISTEN/NOTIFY
and two tables) when several worker processes serve the machine without Redis, so that
each of them (and each pod on the same database) does the same. Created and closed with
`AppRuntime` (`runtime.ops`); `run_call` registers each call here and takes it out at
its end.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from typing import TYPE_CHECKING, Any

from loguru import logger

from config import Settings
from ops.bus import EventBus, InProcessBus
from ops.commands import escalation_command
from ops.events import CallContext
from ops.feed import CallFeed
from ops.postgres_link import PostgresLink
from ops.registry import (
    ActiveCall,
    CallRegistry,
    HeartbeatRegistry,
    LocalRegistry,
    RedisRegistry,
)

if TYPE_CHECKING:
    from call.call_session import CallSession
    from ops.commands import CallControl


def new_pod_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class OpsPlane:
    def __init__(self, bus: EventBus, registry: CallRegistry,
                 link: PostgresLink | None = None) -> None:
        self.bus = bus
        self.registry = registry
        self.pod_id = bus.pod_id
        self._link = link  # the PostgreSQL connection bus and registry share

    @classmethod
    def from_settings(cls, settings: Settings, pod_id: str | None = None, *,
                      dsn: str | None = None) -> OpsPlane:
        """Redis when `REDIS_URL` is set; else PostgreSQL at `dsn` when given (several
        worker processes); else in process."""
        pod_id = pod_id or new_pod_id()
        sizes = {"replay_events": settings.ops.observer_replay_events,
                 "queue_events": settings.ops.observer_queue_events}
        ttl_s = settings.ops.call_registry_ttl_s
        if settings.ops.redis_url is not None:
            from ops.redis_bus import RedisBus

            url = settings.ops.redis_url.get_secret_value()
            return cls(RedisBus(url, pod_id, **sizes), RedisRegistry(url, pod_id, ttl_s=ttl_s))
        if dsn is not None:
            from ops.postgres_bus import PostgresBus
            from ops.postgres_registry import PostgresRegistry

            link = PostgresLink(dsn, "operations")
            return cls(PostgresBus(dsn, pod_id, link=link, **sizes),
                       PostgresRegistry(link, pod_id, ttl_s=ttl_s), link)
        return cls(InProcessBus(pod_id, **sizes), LocalRegistry(pod_id))

    @property
    def shared(self) -> bool:
        return not isinstance(self.registry, LocalRegistry)

    def where(self) -> str:
        if isinstance(self.registry, HeartbeatRegistry):
            return f"events and registry in {self.registry.backend}"
        return "in process"

    async def start(self) -> None:
        await self.bus.start()
        await self.registry.start()
        logger.info(f"operations: pod {self.pod_id}, {self.where()}")

    async def close(self) -> None:
        await self.registry.close()
        await self.bus.close()
        if self._link is not None:
            await self._link.close()

    def feed(self, call_id: str, workspace_id: str | None, *, service_id: str | None,
             call_sid: str | None, initial_state: str | None,
             navigator_model: str | None = None) -> CallFeed:
        """The observer stream of a new call (handed to its CallLog)."""
        ctx = CallContext(call_id=call_id, workspace_id=workspace_id, service_id=service_id,
                          call_sid=call_sid, initial_state=initial_state,
                          navigator_model=navigator_model)
        return CallFeed(ctx, self.bus, self.registry)

    def call_running(self, session: CallSession, control: CallControl) -> None:
        """The call is live on this pod: listed, and open to operator commands."""
        if session.workspace_id is None:
            return  # no workspace: no one may observe or command it
        self.registry.add(ActiveCall(
            call_id=session.call_id, workspace_id=session.workspace_id,
            service_id=session.service_id, pod_id=self.pod_id, started_at=time.time(),
            mode=session.mode.value, state=_state(session),
        ))
        self.bus.handle_commands(session.call_id, control.apply,
                                 workspace_id=session.workspace_id)

    def call_finished(self, call_id: str) -> None:
        self.bus.drop_commands(call_id)
        self.registry.remove(call_id)

    async def escalation_changed(self, workspace_id: str, escalation: dict[str, Any], *,
                                 status: str, operator: str) -> bool:
        """An operator acknowledged or resolved one of a call's escalations (stored
        already): if the call is running, on any pod, that pod's feed numbers an
        `escalation` event for its observers and its record keeps it. False when the
        call is not running (the stored change is all there is: no one watches a
        finished call live) or its pod could not be reached (logged; still stored)."""
        command = escalation_command(workspace_id, escalation, status=status, operator=operator)
        try:
            entry = await self.registry.get(command.call_id)
            if entry is None or entry.workspace_id != workspace_id:
                return False
            delivered = await self.bus.send_command(entry.pod_id, command)
        except Exception as error:  # noqa: BLE001 - Redis down: the change is stored
            logger.warning(f"call {command.call_id}: escalation {status} not sent to its "
                           f"observers ({type(error).__name__})")
            return False
        if not delivered:
            logger.info(f"call {command.call_id}: escalation {status} after the call ended")
        return delivered


def navigator_model(provider: str, settings: Settings) -> str:
    """The model behind the navigator's provider ("rules" for the deterministic one)."""
    models = {"google": settings.providers.google_navigator_model,
              "anthropic": settings.providers.anthropic_navigator_model}
    return models.get(provider, "rules" if provider == "deterministic" else provider)


def _state(session: CallSession) -> str | None:
    feed = session.log.observe
    return feed.ctx.state or feed.ctx.initial_state if isinstance(feed, CallFeed) else None
