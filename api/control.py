"""The control plane: workspace voice settings, safety concepts and service keyterms."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api", tags=["control plane"])
