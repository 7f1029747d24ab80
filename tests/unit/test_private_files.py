"""Recordings (PHI) and the folders they live in are readable by this user only, whatever
the umask: files 0600, folders 0700."""

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from call.recording import write_wav
from db.recording_files import channel_wav
from lib.private_files import make_private_dirs, private_dir, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual 022: without care, files come out 0644 and folders 0755."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_recording_and_its_channels_are_private_in_a_private_folder(tmp_path):
    recordings = tmp_path / "data" / "recordings"
    recording = recordings / "call.wav"

    write_wav(recording, b"\x01\x00\x02\x00" * 800, 8000, 2)
    caller = channel_wav(recording, "caller")

    assert mode(recording) == mode(caller) == 0o600
    assert mode(recordings) == mode(tmp_path / "data") == 0o700
    assert not list(recordings.glob("*.partial"))


def test_a_recordings_folder_left_open_by_an_older_version_is_closed(tmp_path):
    recordings = tmp_path / "recordings"
    recordings.mkdir(mode=0o755)
    old = recordings / "old.wav"
    old.write_bytes(b"RIFF")
    old.chmod(0o644)

    write_wav(recordings / "new.wav", b"\x00\x00" * 160, 8000, 1)

    assert mode(recordings) == 0o700  # the older file is out of others' reach too
    assert mode(recordings / "new.wav") == 0o600


def test_existing_folders_above_are_left_alone_and_rewritten_files_narrowed(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o750)
    shared.chmod(0o750)
    secret = shared / "new" / "token"
    make_private_dirs(secret.parent)
    secret.write_bytes(b"x")
    secret.chmod(0o644)

    write_private(secret, b"y")

    assert mode(shared) == 0o750 and mode(shared / "new") == 0o700
    assert mode(secret) == 0o600 and secret.read_bytes() == b"y"
    assert private_dir(shared) == shared and mode(shared) == 0o700
