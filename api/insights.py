"""What recent calls show: the state guide of seed 002 (canonical vs observed)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api", tags=["insights"])
