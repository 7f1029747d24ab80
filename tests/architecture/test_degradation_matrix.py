"""The degradation matrix in docs/ARCHITECTURE.md cannot rot: every test it names exists,
every row names a test or says it has none, and every chaos test is named in it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
SECTION = "## What each failure does (the degradation matrix)"
TEST_COLUMN = "the test that covers it"
NO_TEST = "no test"
# A pytest node id in backticks: a test file, `::`, a test name, maybe a parameter id.
NODE_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[[^\]`]*\])?`")


@dataclass(frozen=True)
class Row:
    failure: str
    tests: str


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


@cache
def matrix() -> tuple[Row, ...]:
    """The matrix's rows (group headings left out)."""
    text = ARCHITECTURE.read_text()
    assert SECTION in text, f"{ARCHITECTURE.name} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    header, _separator, *body = table
    columns = _cells(header)
    assert TEST_COLUMN in columns, columns
    failure_at, tests_at = 0, columns.index(TEST_COLUMN)
    rows = []
    for line in body:
        cells = _cells(line)
        assert len(cells) == len(columns), f"a row with {len(cells)} cells: {line[:80]}"
        if not any(cells[1:]):
            continue  # a group heading
        rows.append(Row(cells[failure_at], cells[tests_at]))
    return tuple(rows)


@cache
def _defines(path: Path, name: str) -> bool:
    pattern = rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\("
    return re.search(pattern, path.read_text(), re.MULTILINE) is not None


def test_every_row_names_the_tests_that_cover_it_or_says_it_has_none():
    rows = matrix()
    assert len(rows) >= 30, "the matrix was not found whole"
    for row in rows:
        named = NODE_ID.findall(row.tests)
        assert named or row.tests == NO_TEST, (
            f"{row.failure!r}: name its tests as `tests/<file>.py::<test>`, or say {NO_TEST!r}")


def test_every_test_the_matrix_names_exists():
    missing = []
    for row in matrix():
        for file, name in NODE_ID.findall(row.tests):
            path = ROOT / file
            if not path.is_file() or not _defines(path, name):
                missing.append(f"{file}::{name} ({row.failure})")
    assert missing == [], "the matrix names tests that do not exist:\n" + "\n".join(missing)


def test_every_chaos_test_is_named_in_the_matrix():
    named = {file for row in matrix() for file, _name in NODE_ID.findall(row.tests)}
    chaos = sorted(p.relative_to(ROOT).as_posix()
                   for p in (ROOT / "tests" / "chaos").glob("test_*.py"))
    assert chaos, "no chaos tests found"
    assert [file for file in chaos if file not in named] == []
