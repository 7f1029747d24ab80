"""The event loop every entry point runs on: uvloop where it is installed, asyncio otherwise.

uvicorn picks uvloop by itself when it can, so the service already runs on it;
naming the choice in one place keeps the benchmarks, the simulator and the
service on the same loop, so what `bench/` measures is what callers get.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop has no Windows build
    uvloop = None


def uvicorn_loop() -> Literal["uvloop", "asyncio"]:
    """The `loop` setting for uvicorn."""
    return "uvloop" if uvloop is not None else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new loop of the chosen kind."""
    if uvloop is not None:
        return uvloop.run(main)
    return asyncio.run(main)


class BackgroundTasks:
    """Work started off the caller's path and kept referenced until it ends: the loop holds
    tasks only weakly, so a task nobody keeps may disappear mid-run."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def start(self, work: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def wait(self) -> None:
        """Until everything started so far has ended (its errors are its own)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
