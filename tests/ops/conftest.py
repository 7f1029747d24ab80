"""The real service for the live-call tests (the e2e fixture), with short observer timers."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import another_server, server  # noqa: F401 - fixtures used here


@pytest.fixture(scope="module")
async def live_server(server, db, tmp_path_factory):  # noqa: F811
    """Pings every 0.5 s and 1 s to authenticate, so the tests see both quickly."""
    async with another_server(server, db, tmp_path_factory, "live",
                              {"OBSERVER_PING_S": "0.5", "OBSERVER_AUTH_TIMEOUT_S": "1"}
                              ) as running:
        yield running
