"""The kill rate per mutated file of the last `mutmut run` (`make mutation`).

mutmut keeps each file's results in mutants/<path>.meta; a mutant is caught when a test
failed on it (killed) or it ran past its time limit (timeout, an endless loop). Mutants
no selected test reaches count as not caught: they are code the fast tests miss.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

CAUGHT = ("killed", "timeout")


def kill_rates(root: Path = Path("mutants")) -> dict[str, Counter[str]]:
    """Each mutated file's mutants counted by status."""
    rates: dict[str, Counter[str]] = {}
    for meta in sorted(root.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"].values()
        rates[str(meta.relative_to(root))[: -len(".meta")]] = Counter(
            status_by_exit_code[code] for code in codes)
    return rates


def report(rates: dict[str, Counter[str]]) -> str:
    lines = [f"{'file':45} {'caught':>7} {'of':>5} {'rate':>6}  survived / no tests"]
    totals: Counter[str] = Counter()
    for path, counts in rates.items():
        totals += counts
        lines.append(_row(path, counts))
    lines.append(_row("all", totals))
    return "\n".join(lines)


def _row(name: str, counts: Counter[str]) -> str:
    caught, total = sum(counts[s] for s in CAUGHT), sum(counts.values())
    rate = f"{100 * caught / total:.0f}%" if total else "-"
    return (f"{name:45} {caught:>7} {total:>5} {rate:>6}  "
            f"{counts['survived']} / {counts['no tests']}")


if __name__ == "__main__":
    found = kill_rates()
    if not found:
        sys.exit("no mutmut results under mutants/: run `make mutation`")
    print(report(found))
