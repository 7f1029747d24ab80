"""Ground-truth transcripts: a call's recording re-transcribed by a batch model."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api/calls", tags=["transcripts"])
