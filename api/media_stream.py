"""`WS /ws`: Twilio Media Streams and eval text sessions (see runner/call_runner.py)."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from runner.call_runner import serve_media_stream

router = APIRouter()


@router.websocket("/ws")
async def media_stream(websocket: WebSocket) -> None:
    await serve_media_stream(websocket, websocket.app.state.runtime)
