"""A bundled rules file with one change, written to a test's own folder."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def rewritten(source: Path, folder: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    """`source` loaded, changed by `change` (in place), and saved under `folder`."""
    data = yaml.safe_load(source.read_text())
    change(data)
    path = folder / source.name
    path.write_text(yaml.safe_dump(data))
    return path
