"""The sweeper: every few seconds, close the calls no one else will close.

- the calls of a process that is gone (`runner/orphaned_calls`, `server_crash`): a
  crashed pod's calls are closed by a surviving one;
- answered calls (`ringing`) whose media stream never came (`never_streamed`): Twilio
  does not retry a status callback we could not take, so nothing else would end them;
  their capacity hold on this machine is dropped at once, and the set-up the answer
  stored for their stream (`call_stream_setups`) with them;
- and it forgets processes silent for a week that left no open call.

Each pass is bounded in time, even on a frozen database (`db.deadline.within`); a pass that fails is logged and the next one tries again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from loguru import logger

from call.call_session import CompletionReason
from db import instances, open_calls
from db import repositories as repo
from db.deadline import within
from db.instances import ProcessIdentity
from db.open_calls import Closure
from runner.orphaned_calls import BATCH_LIMIT, close_orphaned_calls


@dataclass(frozen=True)
class SweepLimits:
    interval_s: float
    never_streamed_after_s: float
    stale_after_s: float
    unowned_after_s: float  # no live call is older: an unowned open call this old is dead
    pass_timeout_s: float = 20.0
    forget_after_s: float = 7 * 24 * 3600.0  # an instance row silent this long, no open call


@dataclass
class SweepResult:
    orphaned: list[str] = field(default_factory=list)
    never_streamed: list[str] = field(default_factory=list)


class CallSweeper:
    """Closes orphaned and never-streamed calls, one bounded pass per interval."""

    def __init__(self, pool: asyncpg.Pool, me: ProcessIdentity, recordings_dir: Path,
                 limits: SweepLimits, *, drop_hold: Callable[[str], None]) -> None:
        """`drop_hold(call_id)`: free the capacity this pod holds for a call answered here."""
        self._pool = pool
        self._me = me
        self._recordings_dir = recordings_dir
        self.limits = limits
        self._drop_hold = drop_hold
        self._failing = False

    async def run(self) -> None:
        """Sweep until cancelled."""
        while True:
            await asyncio.sleep(self.limits.interval_s)
            await self.sweep()

    async def sweep(self) -> SweepResult:
        """One pass (never raises: a failed pass is logged and retried next time)."""
        result = SweepResult()
        try:
            await within(self._pass(result), self.limits.pass_timeout_s, what="call sweep")
        except Exception as error:  # noqa: BLE001 - the next pass tries again
            if not self._failing:
                logger.warning(f"call sweep failed ({type(error).__name__}); retrying next pass")
            self._failing = True
            return result
        if self._failing:
            logger.info("call sweep working again")
        self._failing = False
        return result

    async def _pass(self, result: SweepResult) -> None:
        result.orphaned = await close_orphaned_calls(
            self._pool, self._me, self._recordings_dir,
            stale_after_s=self.limits.stale_after_s, unowned_after_s=self.limits.unowned_after_s)
        result.never_streamed = await self._close_never_streamed()
        await repo.forget_stream_setups(
            self._pool, older_than_s=self.limits.never_streamed_after_s + self.limits.interval_s)
        await instances.prune(self._pool, older_than_s=self.limits.forget_after_s)

    async def _close_never_streamed(self) -> list[str]:
        waited = self.limits.never_streamed_after_s
        calls = await open_calls.never_streamed(
            self._pool, self._me.instance_id, older_than_s=waited, limit=BATCH_LIMIT)
        closed = []
        for call in calls:
            closure = Closure(
                call.call_id, CompletionReason.NEVER_STREAMED.value,
                events=[("call_ended", {"reason": CompletionReason.NEVER_STREAMED.value,
                                        "waited_s": waited, "closed_by": self._me.instance_id})],
                only_if_never_streamed=True,
            )
            if await open_calls.close(self._pool, closure):
                self._drop_hold(call.call_id)
                closed.append(call.call_id)
        if closed:
            logger.warning(f"closed {len(closed)} answered call(s) whose media stream never "
                           f"came within {waited:.0f} s")
        return closed
