"""A call's stereo recording over HTTP. API key required.

`/recording/stereo` is the WAV as stored (caller left, agent right),
`/recording/{caller|agent}` one side as a mono WAV, `/recording/waveform` both
sides' amplitude envelopes for a timeline. The WAV routes honour one byte range
(`Range: bytes=a-b | a- | -n`) so a browser's audio element can seek.
"""

from __future__ import annotations

import asyncio
import wave
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from api.deps import Caller, Role, get_runtime, own_call, require_role
from db import recording_files as rec
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/calls", tags=["recordings"])

WAV = "audio/wav"
DEFAULT_WAVEFORM_POINTS = 800
MISSING_FILE = "recording file is missing"
T = TypeVar("T")

_ERRORS: dict[int | str, dict] = {
    401: {"description": "Missing or invalid API key"},
    404: {"description": "No such call in this workspace, or it has no recording"},
}
_WAV_RESPONSES: dict[int | str, dict] = {
    200: {"content": {WAV: {"schema": {"type": "string", "format": "binary"}}},
          "description": "The whole WAV file"},
    206: {"content": {WAV: {"schema": {"type": "string", "format": "binary"}}},
          "description": "The requested byte range (`Content-Range` says which)"},
    416: {"description": "Range not satisfiable (`Content-Range: bytes */<size>`)"},
    **_ERRORS,
}


class WaveformOut(BaseModel):
    """Peak amplitude (0..1) per time slice of each channel, slices of equal length."""

    sample_rate: int
    duration_ms: int
    points: int
    caller: list[float] = Field(description="Caller channel (left), one value per slice")
    agent: list[float] = Field(description="Agent channel (right), one value per slice")


def recording_fields(call: dict[str, Any]) -> dict[str, Any]:
    """A call's recording as the API shows it: whether there is one and where to fetch it,
    never where the server keeps it (a path tells a client about the host, nothing more)."""
    saved = bool(call.get("recording_path"))
    return {"has_recording": saved,
            "recording_url": f"/api/calls/{call['id']}/recording/stereo" if saved else None}


def without_recording_path(call: dict[str, Any]) -> dict[str, Any]:
    """A call row fit to leave the server: its recording path, if it has the column,
    replaced by `recording_fields`."""
    if "recording_path" not in call:
        return call
    public = {key: value for key, value in call.items() if key != "recording_path"}
    return {**public, **recording_fields(call)}


async def call_recording(runtime: AppRuntime, call_id: str, workspace_id: str) -> Path | None:
    """The recording of one of the workspace's calls: None if the call has none.

    404 for an unknown call and another workspace's call alike.
    """
    path = (await own_call(runtime, call_id, workspace_id)).get("recording_path")
    return Path(path) if path else None


async def _existing_recording(runtime: AppRuntime, call_id: str, workspace_id: str) -> Path:
    path = await call_recording(runtime, call_id, workspace_id)
    if path is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "call has no recording")
    if not await asyncio.to_thread(path.is_file):
        raise HTTPException(status.HTTP_404_NOT_FOUND, MISSING_FILE)
    return path


@contextmanager
def recording_read_errors() -> Iterator[None]:
    """Reading a recording as HTTP errors: the file can vanish after the check (404) or
    not be a WAV this server can read (422)."""
    try:
        yield
    except FileNotFoundError:
        raise HTTPException(status.HTTP_404_NOT_FOUND, MISSING_FILE) from None
    except (ValueError, EOFError, wave.Error) as error:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_ENTITY,
                            f"recording is not a readable WAV: {error}") from None


async def _read_recording(read: Callable[..., T], *args: object) -> T:
    """A blocking read of the recording, off the event loop."""
    with recording_read_errors():
        return await asyncio.to_thread(read, *args)


def _range_response(request: Request, source: Path | bytes, size: int, filename: str) -> Response:
    headers = {"Accept-Ranges": "bytes", "Content-Disposition": f'inline; filename="{filename}"'}
    try:
        wanted = rec.parse_range(request.headers.get("range"), size)
    except rec.RangeNotSatisfiable:
        return Response(status_code=status.HTTP_416_RANGE_NOT_SATISFIABLE,
                        headers={**headers, "Content-Range": f"bytes */{size}"})
    start, length, code = 0, size, status.HTTP_200_OK
    if wanted is not None:
        start, length, code = wanted.start, wanted.length, status.HTTP_206_PARTIAL_CONTENT
        headers["Content-Range"] = wanted.content_range(size)
    headers["Content-Length"] = str(length)
    if isinstance(source, bytes):
        return Response(source[start:start + length], status_code=code, headers=headers,
                        media_type=WAV)
    return StreamingResponse(rec.iter_file(source, start, length), status_code=code,
                             headers=headers, media_type=WAV)


async def _file_size(path: Path) -> int:
    return (await _read_recording(path.stat)).st_size


@router.get("/{call_id}/recording/stereo", response_class=Response, responses=_WAV_RESPONSES,
            summary="The call's stereo WAV (caller left, agent right)")
async def stereo_recording(
    call_id: str,
    request: Request,
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> Response:
    workspace_id = caller.workspace_id
    path = await _existing_recording(runtime, call_id, workspace_id)
    return _range_response(request, path, await _file_size(path), f"{call_id}.wav")


@router.get("/{call_id}/recording/waveform", response_model=WaveformOut,
            responses={**_ERRORS, 422: {"description": "Recording unreadable or bad `points`"}},
            summary="Amplitude envelope of both channels, for a timeline")
async def recording_waveform(
    call_id: str,
    points: int = Query(default=DEFAULT_WAVEFORM_POINTS, ge=1, le=rec.MAX_WAVEFORM_POINTS),
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> WaveformOut:
    workspace_id = caller.workspace_id
    path = await _existing_recording(runtime, call_id, workspace_id)
    shape = await _read_recording(rec.waveform, path, points)
    return WaveformOut(**shape.__dict__)


@router.get("/{call_id}/recording/{channel}", response_class=Response, responses=_WAV_RESPONSES,
            summary="One side of the call as a mono WAV")
async def channel_recording(
    call_id: str,
    channel: rec.Channel,
    request: Request,
    caller: Caller = Depends(require_role(Role.READ_ONLY)),
    runtime: AppRuntime = Depends(get_runtime),
) -> Response:
    workspace_id = caller.workspace_id
    path = await _existing_recording(runtime, call_id, workspace_id)
    source = await _read_recording(rec.channel_wav, path, channel)
    size = len(source) if isinstance(source, bytes) else await _file_size(source)
    return _range_response(request, source, size, f"{call_id}.{channel}.wav")
