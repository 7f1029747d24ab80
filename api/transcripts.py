"""Ground-truth transcripts: a call's recording re-transcribed by a batch model.

`POST /api/calls/{call_id}/verify-transcript` (API key) runs
`runner.transcript_verification.verify_recording` (Deepgram pre-recorded when a
key is configured, else the local recognizer), stores the result on the call
(`verified_transcript`, `verified_words`, `transcript_accuracy`, ...; shown by
`GET /api/calls/{call_id}`), proposes the words the real-time recognizer missed as
keyterms of the call's service, and returns a summary.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, status
from loguru import logger
from pydantic import BaseModel, Field

from api.deps import Caller, Role, get_runtime, require_role
from api.recordings import call_recording, recording_read_errors
from runner import transcript_verification as tv
from runner.runtime import AppRuntime

router = APIRouter(prefix="/api/calls", tags=["transcripts"])


class VerifyTranscriptOut(BaseModel):
    call_id: str
    verifier: str = Field(description='"deepgram:nova-3" or "local:pocketsphinx"')
    accuracy: float = Field(description="1 - wer, at least 0")
    wer: float = Field(description="Word error rate of the real-time caller transcript "
                       "against the verified caller channel (normalised)")
    words: int = Field(description="Words in the verified transcript, both channels")
    transcript: str = Field(description='Both sides in time order, "caller: …" / "agent: …"')
    suggested: int = Field(description="Keyterm suggestions of the call's service this "
                           "verification proposed or strengthened (GET /api/stt-suggestions)")


@router.post(
    "/{call_id}/verify-transcript",
    response_model=VerifyTranscriptOut,
    responses={
        401: {"description": "Missing or invalid API key"},
        404: {"description": "No such call in this workspace, or its recording file is missing"},
        409: {"description": "The call has no recording (yet)"},
        422: {"description": "The recording is not a readable WAV"},
        502: {"description": "The batch model failed"},
        504: {"description": "Verification took longer than TRANSCRIPT_VERIFY_TIMEOUT_S"},
    },
    summary="Re-transcribe the call's recording and score the real-time transcript",
)
async def verify_transcript(
    call_id: str,
    caller: Caller = Depends(require_role(Role.OPERATOR)),
    runtime: AppRuntime = Depends(get_runtime),
) -> VerifyTranscriptOut:
    workspace_id = caller.workspace_id
    recording = await call_recording(runtime, call_id, workspace_id)
    if recording is None:
        raise HTTPException(status.HTTP_409_CONFLICT, "call has no recording")
    try:
        with recording_read_errors():  # a missing file 404, an unreadable WAV 422
            result = await tv.verify_recording(runtime.db.pool, call_id, recording,
                                               **tv.verifier_options(runtime.settings))
    except TimeoutError:
        raise HTTPException(status.HTTP_504_GATEWAY_TIMEOUT,
                            "transcript verification timed out") from None
    except tv.VerificationError as error:
        logger.warning(f"call {call_id}: transcript verification failed: {error}")
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(error)) from None
    return VerifyTranscriptOut(**result.__dict__)
