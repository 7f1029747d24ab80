"""A call's stereo recording over HTTP (seed 000, "Recordings"). API key required."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api/calls", tags=["recordings"])
