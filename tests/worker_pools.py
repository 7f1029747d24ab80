"""The worker pools the apps tests start share.

The offline decoders', prosody analyzer's and grammar pass's worker processes are
process-wide, as in the service, where one app lives as long as its process. A test
process starts many apps (and runtimes) one after another, so an app's close here leaves
them running for the next one (spawning them costs seconds of CPU each time), and the
session stops them at its end (`tests/conftest.py`). `stop_worker_pools` itself is tested
by `tests/services/test_auto_transcript_verify.py`.

A worker ends with the thread that spawned it: apps on the session's loop (the main
thread) may spawn them; an app under TestClient, on a thread of its own, finds them
started (`worker_pools_started` in `tests/conftest.py`, and `app_client.app_in_testclient`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runner import runtime


@contextmanager
def pools_left_to_the_next_app() -> Iterator[None]:
    """Within it, an app's (or a runtime's) close leaves the worker pools running."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "stop_worker_pools", lambda: None)
        yield


def worker_processes() -> set[int]:
    """The PIDs of this process's multiprocessing children (the pools' workers among them)."""
    return {process.pid for process in multiprocessing.active_children()}
