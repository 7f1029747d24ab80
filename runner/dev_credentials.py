"""Local development secrets, so `make run` + the simulator work with no accounts.

Twilio webhooks are always signature-checked. Without `TWILIO_AUTH_TOKEN` the
service signs with a random per-installation token kept in the data directory;
only a local client that can read that file (the simulator) can call it. The
same goes for a development API key used by the simulator to read call records.
Both files are created with mode 0600 and never logged.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from config import Settings
from lib.private_files import make_private_dirs

TWILIO_TOKEN_FILE = "dev_twilio_auth_token"
API_KEY_FILE = "dev_api_key"


def _read_or_create(path: Path, make: callable) -> str:
    if path.exists():
        value = path.read_text().strip()
        if value:
            return value
    make_private_dirs(path.parent)
    value = make()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value


def twilio_auth_token(settings: Settings) -> str:
    """The token webhooks are signed with: the real one, else the local development one."""
    if settings.telephony.twilio_auth_token is not None:
        return settings.telephony.twilio_auth_token.get_secret_value()
    return _read_or_create(settings.storage.data_dir / TWILIO_TOKEN_FILE,
                           lambda: secrets.token_hex(16))


def uses_dev_twilio_token(settings: Settings) -> bool:
    return settings.telephony.twilio_auth_token is None


def dev_api_key_path(settings: Settings) -> Path:
    return settings.storage.data_dir / API_KEY_FILE


def read_dev_api_key(settings: Settings) -> str | None:
    path = dev_api_key_path(settings)
    return path.read_text().strip() or None if path.exists() else None


def write_dev_api_key(settings: Settings, key: str) -> None:
    """Keep the key created for the embedded development database (0600)."""
    path = dev_api_key_path(settings)
    make_private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
