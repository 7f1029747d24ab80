"""Live calls: the active-call list, observer WebSockets and operator actions, on any pod.

- `GET /api/calls/active`: the workspace's running calls, from the registry every pod
  writes (`ops/registry.py`).
- `WS /api/calls/{call_id}/observe`: `session_info` (a snapshot), the call's recent
  events (replay), then its live events; `ping` every `OBSERVER_PING_S`. A call that has
  ended: snapshot, replay, `session_end`, then a normal close.
- `WS /api/observe`: the workspace's live events, every call.
- `POST /api/calls/{call_id}/actions/{end|take-over|release}`: sent over the bus to the
  pod running the call (`ops/commands.py`).

Sockets authenticate with `Authorization: Bearer <key>` or, as browsers cannot set that
header, a first message `{"type": "auth", "api_key": "..."}` within
`OBSERVER_AUTH_TIMEOUT_S` (never the query string: it ends up in logs). A wrong key,
a key whose role is below operator (the reason names the role), or another workspace's
call closes the socket with 1008 before any data; so does a key from a client address
past its failed-authentication budget ("too many failed attempts").
A workspace holding `OBSERVER_MAX_PER_WORKSPACE` observer sockets on this pod gets a new
one closed with 1013 (try again later) once it has authenticated, before anything is
read for it; a socket frees its slot however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, WebSocket, status
from loguru import logger
from pydantic import BaseModel
from starlette.websockets import WebSocketDisconnect, WebSocketState

from api.deps import (
    AuthThrottled,
    Caller,
    Role,
    authenticate_key,
    bearer_key,
    get_runtime,
    not_allowed,
    own_call,
    require_role,
    socket_role,
)
from api.recordings import without_recording_path
from db import repositories as repo
from db.deadline import DatabaseUnavailable
from ops.bus import ObserverSlot, Subscription
from ops.commands import CallAction, OperatorAction, OperatorCommand
from ops.registry import ActiveCall, RegistryUnavailable
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api", tags=["live calls"])

POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
SNAPSHOT_TIMEOUT_S = 2.0
SNAPSHOT_ROWS = 50  # most recent turns / transitions / tool calls in session_info
AUTH_MESSAGE_BYTES = 4096
OBSERVER_ROLE = Role.OPERATOR  # watching live calls is an operator's work


def canonical_call_id(call_id: str) -> str:
    """A call id as pods key it (lower-case UUID): `/api/calls/{ID}` in capitals or
    without hyphens still finds the running call and its events."""
    parsed = repo.as_uuid(call_id)
    return str(parsed) if parsed is not None else call_id


class ActiveCalls(BaseModel):
    calls: list[dict[str, Any]]


class ActionAccepted(BaseModel):
    call_id: str
    action: CallAction
    pod_id: str


@router.get("/calls/active", response_model=ActiveCalls)
async def active_calls(
    caller: Caller = Depends(require_role(Role.OPERATOR)),
    runtime: AppRuntime = Depends(get_runtime),
) -> ActiveCalls:
    workspace_id = caller.workspace_id
    try:
        calls = await runtime.ops.registry.active(workspace_id)
    except RegistryUnavailable as error:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "call registry unavailable") from error
    return ActiveCalls(calls=[entry.to_dict() for entry in calls])


@router.post("/calls/{call_id}/actions/{action}", status_code=status.HTTP_202_ACCEPTED,
             response_model=ActionAccepted)
async def operator_action(
    call_id: str, action: CallAction,
    caller: Caller = Depends(require_role(Role.OPERATOR)),
    runtime: AppRuntime = Depends(get_runtime),
) -> ActionAccepted:
    """404: no such call in this workspace; 409: it is not running; 503: the pod running
    it could not be reached."""
    workspace_id = caller.workspace_id
    call_id = canonical_call_id(call_id)
    try:
        entry = await runtime.ops.registry.get(call_id)
    except RegistryUnavailable as error:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            "call registry unavailable") from error
    if entry is None or entry.workspace_id != workspace_id:
        await own_call(runtime, call_id, workspace_id)
        raise HTTPException(status.HTTP_409_CONFLICT, "call is not active")
    command = OperatorCommand(call_id=call_id, workspace_id=workspace_id,
                              action=OperatorAction(action))
    try:
        delivered = await runtime.ops.bus.send_command(entry.pod_id, command)
    except Exception as error:  # noqa: BLE001 - the bus is down: say so, not 500
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "event bus unavailable") \
            from error
    if not delivered:
        raise HTTPException(status.HTTP_409_CONFLICT, "call is not active")
    logger.info(f"call {call_id}: operator {action} sent to pod {entry.pod_id}")
    return ActionAccepted(call_id=call_id, action=action, pod_id=entry.pod_id)


# --- Observer sockets --------------------------------------------------------------


def auth_message_key(raw: str) -> str | None:
    """The API key of a first message `{"type": "auth", "api_key": "..."}`; None for
    anything else."""
    if len(raw) > AUTH_MESSAGE_BYTES:
        return None
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("type") != "auth":
        return None
    key = message.get("api_key")
    if not isinstance(key, str) or not key.strip():
        return None
    return key.strip()


async def authenticate(websocket: WebSocket, runtime: AppRuntime) -> Caller | None:
    """The caller of the socket's API key (header, else first message); None: none.
    A throttled client address (`api.deps.AuthThrottled`) is refused here, with its reason."""
    key = bearer_key(websocket.headers.get("authorization"))
    if key is None:
        try:
            raw = await asyncio.wait_for(websocket.receive_text(),
                                         runtime.settings.ops.observer_auth_timeout_s)
        except (TimeoutError, WebSocketDisconnect, RuntimeError, KeyError):
            return None
        key = auth_message_key(raw)
        if key is None:
            return None
    try:
        return await asyncio.wait_for(authenticate_key(websocket, runtime, key),
                                      SNAPSHOT_TIMEOUT_S)
    except AuthThrottled:
        await _refuse(websocket, "too many failed attempts")
        return None
    except DatabaseUnavailable:
        logger.warning("observer: API key not checked (database unavailable)")
        await _refuse(websocket, "database unavailable", TRY_AGAIN_LATER)
        return None
    except Exception as error:  # noqa: BLE001 - cannot check the key: no access
        logger.warning(f"observer: API key not checked ({type(error).__name__})")
        return None


async def _refuse(websocket: WebSocket, reason: str, code: int = POLICY_VIOLATION) -> None:
    if websocket.application_state is WebSocketState.DISCONNECTED:
        return  # already refused (with a more precise reason)
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await websocket.close(code=code, reason=reason)


async def _send(websocket: WebSocket, message: dict[str, Any]) -> bool:
    """False once the observer is gone."""
    try:
        await websocket.send_text(json.dumps(message, default=str))
        return True
    except Exception:  # noqa: BLE001 - a closed socket in any of its forms
        return False


def call_snapshot(detail: dict[str, Any] | None, entry: ActiveCall | None) -> dict[str, Any]:
    """`session_info`: the call row, its registry entry and its latest records."""
    snapshot: dict[str, Any] = {"active": entry.to_dict() if entry else None}
    if detail is None:
        snapshot["record_unavailable"] = True
        return snapshot
    children = ("turns", "transitions", "tool_calls")
    snapshot["call"] = without_recording_path(
        {key: value for key, value in detail.items() if key not in (*children, "events")})
    for key in children:
        rows = detail.get(key) or []
        snapshot[key] = rows[-SNAPSHOT_ROWS:]
        snapshot[f"{key}_total"] = len(rows)
    return snapshot


def ended_notice(call: dict[str, Any]) -> dict[str, Any]:
    """`session_end` for an observer of a call that ended before its replay said so."""
    return {"type": "session_end", "call_id": call.get("id"), "seq": None, "ts": time.time(),
            "data": {"call_sid": call.get("call_sid"), "duration_s": call.get("duration_s"),
                     "turns": len(call.get("turns") or []),
                     "completion_reason": call.get("completion_reason"),
                     "final_state": call.get("final_state")}}


async def _call_detail(runtime: AppRuntime, call_id: str,
                       workspace_id: str) -> tuple[bool, dict[str, Any] | None]:
    """(answered, detail): detail None and answered True = not this workspace's call."""
    try:
        detail = await runtime.db.bounded(
            repo.get_call_detail(runtime.db.pool, call_id, workspace_id),
            what="call snapshot", timeout=SNAPSHOT_TIMEOUT_S)
        return True, detail
    except Exception as error:  # noqa: BLE001 - the registry may still vouch for the call
        logger.warning(f"observer: call record not read ({type(error).__name__})")
        return False, None


async def _registry_entry(runtime: AppRuntime, call_id: str) -> ActiveCall | None:
    try:
        return await runtime.ops.registry.get(call_id)
    except RegistryUnavailable:
        return None


async def _admit(websocket: WebSocket) -> tuple[AppRuntime, str, ObserverSlot] | None:
    """Accept the socket, authenticate it, check its role and claim its workspace slot:
    (runtime, workspace id, slot), or None once it has been closed (1008: no access, or
    a role below `OBSERVER_ROLE`; 1013: the workspace's observers are at their cap). The
    caller releases the slot in a `finally` entered before its next await."""
    runtime: AppRuntime = websocket.app.state.runtime
    await websocket.accept()
    caller = await authenticate(websocket, runtime)
    if caller is None:
        await _refuse(websocket, "invalid or missing API key")
        return None
    if not caller.may(OBSERVER_ROLE):
        await _refuse(websocket, not_allowed(caller.role, OBSERVER_ROLE))
        return None
    workspace_id = caller.workspace_id
    limit = runtime.settings.ops.observer_max_per_workspace
    slot = runtime.ops.bus.claim_observer(workspace_id, limit)
    if slot is None:
        logger.warning(f"observer refused: workspace {workspace_id} holds {limit} observers")
        await _refuse(websocket, f"too many observers for this workspace (limit {limit}); "
                      "try again later", code=TRY_AGAIN_LATER)
        return None
    return runtime, workspace_id, slot


@router.websocket("/calls/{call_id}/observe")
@socket_role(OBSERVER_ROLE)
async def observe_call(websocket: WebSocket, call_id: str) -> None:
    if (admitted := await _admit(websocket)) is None:
        return
    runtime, workspace_id, slot = admitted
    try:
        await _observe_call(websocket, runtime, workspace_id, canonical_call_id(call_id))
    finally:
        slot.release()


async def _observe_call(websocket: WebSocket, runtime: AppRuntime, workspace_id: str,
                        call_id: str) -> None:
    answered, detail = await _call_detail(runtime, call_id, workspace_id)
    entry = await _registry_entry(runtime, call_id)
    if entry is not None and entry.workspace_id != workspace_id:
        entry = None
    if detail is None and (answered or entry is None):
        await _refuse(websocket, "unknown call")
        return
    sub, replay = await runtime.ops.bus.subscribe(workspace_id, call_id)
    try:
        if not await _send(websocket, {"type": "session_info", "call_id": call_id,
                                       "ts": time.time(),
                                       "data": call_snapshot(detail, entry)}):
            return
        for event in replay:
            if not await _send(websocket, event.message()):
                return
        if any(event.type == "session_end" for event in replay):
            await _close_normally(websocket)
            return
        if detail is not None and detail.get("ended_at") is not None:
            if await _send(websocket, ended_notice(detail)):
                await _close_normally(websocket)
            return
        await stream(websocket, sub, runtime.settings.ops.observer_ping_s, until_end=True)
    finally:
        runtime.ops.bus.unsubscribe(sub)


@router.websocket("/observe")
@socket_role(OBSERVER_ROLE)
async def observe_workspace(websocket: WebSocket) -> None:
    if (admitted := await _admit(websocket)) is None:
        return
    runtime, workspace_id, slot = admitted
    try:
        await _observe_workspace(websocket, runtime, workspace_id)
    finally:
        slot.release()


async def _observe_workspace(websocket: WebSocket, runtime: AppRuntime,
                             workspace_id: str) -> None:
    sub, _ = await runtime.ops.bus.subscribe(workspace_id)
    try:
        try:
            calls = [e.to_dict() for e in await runtime.ops.registry.active(workspace_id)]
        except RegistryUnavailable:
            calls = None
        if await _send(websocket, {"type": "session_info", "ts": time.time(),
                                   "data": {"workspace_id": workspace_id,
                                            "active_calls": calls}}):
            await stream(websocket, sub, runtime.settings.ops.observer_ping_s, until_end=False)
    finally:
        runtime.ops.bus.unsubscribe(sub)


async def stream(websocket: WebSocket, sub: Subscription, ping_s: float, *,
                 until_end: bool) -> None:
    """Live events and pings until the observer leaves (or, `until_end`, the call ends).
    What the observer sends is read and ignored, so garbage never breaks the stream."""
    listener = asyncio.create_task(_ignore_client(websocket), name="observer-client")
    getter: asyncio.Task | None = None
    last_ping = time.monotonic()
    try:
        while not listener.done():
            wait_s = max(0.0, ping_s - (time.monotonic() - last_ping))
            getter = asyncio.create_task(sub.next(wait_s), name="observer-next")
            await asyncio.wait({getter, listener}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                break
            message = getter.result()
            if message is not None and not await _send(websocket, message):
                break
            if message is not None and until_end and message["type"] == "session_end":
                await _close_normally(websocket)
                break
            if sub.closed and message is None:
                break
            if time.monotonic() - last_ping >= ping_s:
                last_ping = time.monotonic()
                if not await _send(websocket, {"type": "ping", "ts": time.time()}):
                    break
    finally:  # both tasks ended and awaited, however the stream stops (cancelled too)
        for task in (listener, getter):
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(listener, *([getter] if getter else []), return_exceptions=True)


async def _ignore_client(websocket: WebSocket) -> None:
    """Read until the observer disconnects; its messages mean nothing once connected."""
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message.get("type") == "websocket.disconnect":
            return


async def _close_normally(websocket: WebSocket) -> None:
    if websocket.client_state is WebSocketState.CONNECTED:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(code=1000)
