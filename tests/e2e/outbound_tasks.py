"""Outbound tasks for the tests that run the real service's dispatcher on the session's
database: due now, in a timezone where it is the afternoon now (inside every callee's
calling hours)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from db import outbound


def afternoon_zone() -> str:
    """A fixed-offset timezone where it is between noon and 4 pm now."""
    hour = datetime.now(UTC).hour
    ahead = next(n for n in range(-12, 15) if 12 <= (hour + n) % 24 <= 16)
    return "Etc/GMT" if ahead == 0 else f"Etc/GMT{-ahead:+d}"  # Etc/GMT-3 is UTC+3


async def due_task(db, workspace_id: str, service_id: str, callee: str, *,
                   kind: str = "callback") -> str:
    """A task calling `callee` (no patient record), due now, any hour of any day."""
    spec = outbound.TaskSpec(
        workspace_id=workspace_id, service_id=service_id, kind=kind, phone=callee,
        reason="asked for a call back", goal="answer their question",
        timezone=afternoon_zone(), not_before=datetime.now(UTC) - timedelta(minutes=1),
        window_start=time(0), window_end=time(23, 59, 59), window_days=outbound.EVERY_DAY)
    async with db.pool.acquire() as conn, conn.transaction():
        return await outbound.create_task(conn, spec)
