"""Start the real service (`python main.py serve`) as a child process and wait until healthy.

Shared by the end-to-end tests and the benchmarks so both measure the same thing
a caller reaches.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


class ServiceDidNotStart(RuntimeError):
    """The service exited or never became healthy; the message carries its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServiceProcess:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 20.0) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_service(
    env_overrides: dict[str, str], log_path: Path, *, timeout_s: float = 60.0,
    port: int | None = None,
) -> ServiceProcess:
    """Serve on `port` (a free loopback one by default) with no cloud keys, as one
    process unless `env_overrides` sets WORKERS; raise ServiceDidNotStart with its log."""
    port = port or free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "WORKERS": "1",
        **env_overrides,
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "main.py", "serve"], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )
    service = ServiceProcess(f"http://127.0.0.1:{port}", process, log_path)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise ServiceDidNotStart(f"service exited at start-up:\n{service.log()}")
        try:
            if httpx.get(f"{service.url}/health", timeout=2).status_code == 200:
                return service
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise ServiceDidNotStart(f"service did not become healthy:\n{service.log()}")
        time.sleep(0.2)
