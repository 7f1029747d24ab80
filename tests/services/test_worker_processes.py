"""Worker processes end with the service process, however the service ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A service stand-in: starts one pooled worker, says the worker's pid, then waits.
SERVICE = """
import os, sys, time
from lib.worker_processes import spawn_executor

if __name__ == "__main__":
    executor = spawn_executor(1)
    print(executor.submit(os.getpid).result(timeout=60), flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie left for an init that does not reap counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    try:
        return "\tZ" not in status.read_text().split("State:", 1)[1].split("\n", 1)[0]
    except (OSError, IndexError):
        return True


def test_a_pooled_worker_ends_when_its_service_is_killed():
    service = subprocess.Popen(
        [sys.executable, "-c", SERVICE], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        worker_pid = int(service.stdout.readline())
        assert _alive(worker_pid)

        service.send_signal(signal.SIGKILL)  # no clean-up code runs in the service
        service.wait(timeout=10)

        deadline = time.monotonic() + 10
        while _alive(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker_pid), "the worker outlived its service"
    finally:
        service.kill()
        service.stdout.close()
