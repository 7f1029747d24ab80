"""`WS /ws`: Twilio Media Streams and eval text sessions (see runner/call_runner.py);
`WS /ws/listen`: the parties' forked audio during a warm hand-off (runner/listen.py).

The upgrade must carry Twilio's `X-Twilio-Signature` (as the webhooks do); an unsigned one
is refused before it is accepted (HTTP 403), unless `ALLOW_OPEN_EVAL_SESSIONS` lets it
open a text session, and only that.
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket
from loguru import logger

from api.twilio_auth import websocket_signed
from runner.call_runner import serve_media_stream
from runner.listen import serve_listen_stream

router = APIRouter()
POLICY_VIOLATION = 1008


@router.websocket("/ws")
async def media_stream(websocket: WebSocket) -> None:
    runtime = websocket.app.state.runtime
    signed = websocket_signed(websocket, runtime.settings)
    if not signed and not runtime.settings.server.allow_open_eval_sessions:
        missing = "x-twilio-signature" not in websocket.headers
        logger.warning(f"media stream: upgrade {'without a' if missing else 'with an invalid'} "
                       "X-Twilio-Signature; refused")
        await websocket.close(code=POLICY_VIOLATION)  # before accept: HTTP 403
        return
    await serve_media_stream(websocket, runtime, signed=signed)


@router.websocket("/ws/listen")
async def listen_stream(websocket: WebSocket) -> None:
    """A party's audio during a warm hand-off (runner/listen.py): Twilio's signed forks only."""
    runtime = websocket.app.state.runtime
    if not websocket_signed(websocket, runtime.settings):
        logger.warning("listen stream: upgrade without a valid X-Twilio-Signature; refused")
        await websocket.close(code=POLICY_VIOLATION)
        return
    await serve_listen_stream(websocket, runtime)
