"""`make bench`: every benchmark in turn, each rewriting its section of docs/PERFORMANCE.md.

Run on a quiet machine: the latency numbers are wall-clock.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    "bench.stt_wer", "bench.first_audio", "bench.pipeline_latency", "bench.booking_engine",
    "bench.emotion", "bench.observers", "bench.world_model", "bench.field_grammar",
    "bench.observer_fanout", "bench.calls_api", "bench.operations", "bench.personas",
    "bench.recovery", "bench.outbound", "bench.post_booking", "bench.after_call",
    "bench.learning_loop",
]


def main() -> int:
    failed = []
    for module in BENCHMARKS:
        print(f"\n=== {module} ===", flush=True)
        # One process each: no benchmark inherits another's loaded models or threads.
        if subprocess.run([sys.executable, "-m", module]).returncode != 0:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
