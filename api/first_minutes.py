"""What `make run` prints once the server listens: where the dashboard is, and where an
API key to log in with comes from."""

from __future__ import annotations

from config import Settings
from runner import dev_credentials

WILDCARDS = {"", "0.0.0.0", "::"}


def dashboard_url(host: str, port: int) -> str:
    """The dashboard as a browser on this machine reaches it (a server listening on every
    address is reached on the loopback one)."""
    if host in WILDCARDS:
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/dashboard"


def how_to_get_in(settings: Settings, port: int) -> str:
    """The dashboard's address and the ways to a key: the development key file when this
    start kept one (embedded database), and `api-key create` always."""
    create = "python main.py api-key create --workspace demo"
    key_file = dev_credentials.dev_api_key_path(settings)
    lines = [f"Dashboard: {dashboard_url(settings.server.host, port)}"]
    if key_file.is_file():
        lines.append(f"  Log in with the development API key in {key_file}")
        lines.append(f"  or a new key: {create}")
    else:
        lines.append(f"  Log in with an API key: {create}")
    lines.append("  (another workspace: --workspace NAME)")
    return "\n".join(lines)
