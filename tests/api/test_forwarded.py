"""FORWARDED_ALLOW_IPS reaches the HTTP server: behind a trusted proxy the app sees the
caller's address (what the failed-auth throttle counts), from anyone else the peer's."""

from __future__ import annotations

from typing import Any

import pytest
import uvicorn

from config import Settings
from main import server_config


class SeenClients:
    """An ASGI app that answers 204 and remembers each request's client address."""

    def __init__(self) -> None:
        self.clients: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.clients.append(scope["client"][0])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def client_seen(settings: Settings, peer: str, forwarded_for: str) -> str:
    """The client address the app sees for a request from `peer` naming `forwarded_for`."""
    app = SeenClients()
    config = server_config(settings, app)
    config.load()  # wraps the app as the server would (proxy headers, lifespan aside)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": "/", "raw_path": b"/",
             "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8000),
             "client": (peer, 50000), "headers": [(b"x-forwarded-for", forwarded_for.encode())]}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    await config.loaded_app(scope, receive, send)
    return app.clients[-1]


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)


def test_the_setting_reaches_the_server_config(no_env, tmp_path):
    config = server_config(Settings(_env_file=None, data_dir=tmp_path,
                                    forwarded_allow_ips="10.0.0.0/8,192.168.1.7"), app=None)
    assert config.proxy_headers is True
    assert config.forwarded_allow_ips == "10.0.0.0/8,192.168.1.7"
    default = server_config(Settings(_env_file=None, data_dir=tmp_path), app=None)
    assert default.proxy_headers is True
    assert default.forwarded_allow_ips == uvicorn.Config(app=None).forwarded_allow_ips
    assert "127.0.0.1" in default.forwarded_allow_ips  # the local proxy only


async def test_only_a_trusted_proxy_chooses_the_client_address(no_env, tmp_path):
    behind_proxy = Settings(_env_file=None, data_dir=tmp_path, forwarded_allow_ips="10.1.0.0/16")
    assert await client_seen(behind_proxy, "10.1.2.3", "203.0.113.9") == "203.0.113.9"
    assert await client_seen(behind_proxy, "198.51.100.4", "203.0.113.9") == "198.51.100.4"
    default = Settings(_env_file=None, data_dir=tmp_path)
    assert await client_seen(default, "127.0.0.1", "203.0.113.9") == "203.0.113.9"
    assert await client_seen(default, "10.1.2.3", "203.0.113.9") == "10.1.2.3"
