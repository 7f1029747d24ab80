"""Files only this service's user may read: recordings (PHI), secrets, the data folder.

A folder is created 0700 and a file 0600 whatever the umask, so no other account on the
machine can list a data folder or read a call; an existing folder of ours that is wider
is narrowed, never widened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dirs(path: Path) -> Path:
    """Create `path` and each missing folder above it 0700; existing folders are left as
    they are (an operator's data folder keeps the access they gave it)."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        folder.chmod(PRIVATE_DIR_MODE)  # the umask may have taken bits away, never added
    return path


def private_dir(path: Path) -> Path:
    """`path` as a folder of ours only this user may enter: created 0700 (its missing
    parents too), narrowed to 0700 if it was wider."""
    make_private_dirs(path)
    if stat.S_IMODE(path.stat().st_mode) & ~PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def open_private(path: Path) -> BinaryIO:
    """`path` opened for writing from empty, 0600 (narrowed if the file existed wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, data: bytes) -> None:
    with open_private(path) as file:
        file.write(data)
