"""Running `python main.py ARGS` the way an operator does, against the test database."""

from __future__ import annotations

import asyncio

import pytest

import main


@pytest.fixture
def cli(pg_dsn, db, tmp_path, monkeypatch):
    """Runs `main.py ARGS` against the test database; returns its exit status."""
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    # The CLI's logging would outlive the test on capsys's stream (closed after it).
    monkeypatch.setattr(main, "configure_logging", lambda settings: None)

    async def run(*args: str) -> int:
        return await asyncio.to_thread(main.main, list(args))

    return run
