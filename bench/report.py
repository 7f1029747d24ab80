"""Writes benchmark results into their own marked section of docs/PERFORMANCE.md.

Each benchmark owns one section between `<!-- name:start -->` and
`<!-- name:end -->`; a missing section is appended, the rest of the file is kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"


def machine() -> str:
    """CPU count and model, Python and OS: the context every number needs."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, {platform.system()}"


def measured_line(command: str) -> str:
    return f"Measured {dt.date.today().isoformat()} on {machine()}. Reproduce with `{command}`."


def rewrite_section(markdown: str, name: str, section: str) -> str:
    """`markdown` with section `name` replaced by `section` (appended when absent)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in markdown or end not in markdown:
        return f"{markdown.rstrip()}\n\n{start}\n{section}\n{end}\n"
    head, rest = markdown.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{section}\n{end}{tail}"


def write_section(name: str, section: str, doc: Path = DOC) -> None:
    doc.write_text(rewrite_section(doc.read_text() if doc.exists() else "", name, section))
    print(f"wrote the {name} section of {doc}")


def percentile(values: list[float], pct: float) -> float:
    """The `pct`-th percentile (0-100) by nearest rank; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line: its docstring's first line, and `--no-docs`."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    return parser


def publish(name: str, section: str, *, docs: bool = True) -> None:
    """Print a benchmark's section and, unless `docs` is off, write it to PERFORMANCE.md."""
    print(section)
    if docs:
        write_section(name, section)
