"""Where a process's CPU goes while it carries calls, account by account.

The event loop's thread is timed at every task step (a task factory wraps each task's
coroutine) and, inside a step, at every processor's `process_frame`, every hand-off
between processors (`queue_frame`) and every observer callback, so each account gets
its exclusive thread CPU time even when a handler awaits midway. Work sent to thread
pools is timed in the thread that runs it; child processes (the PocketSphinx decoders,
the prosody analyzer) are read from the kernel. What no hook sees is a remainder of its
own: the loop between task steps (I/O polling, timers, callbacks) and native threads.

The hooks cost CPU themselves, so a profiling pass is never a latency measurement.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextvars import Context
from dataclasses import dataclass, field
from typing import Any

import psutil
from pipecat.pipeline.worker import PipelineWorker

from bench.call_driver import MakeWorker, processors_of

HANDOFF = "Pipecat frame hand-off (queue_frame, input/process queues, pipeline glue)"
OBSERVER_QUEUES = "Pipecat observer fan-out (WorkerObserver queues and tasks)"
LOOP_GAPS = "event loop between task steps (I/O polling, timers, callbacks)"
NATIVE_THREADS = "other threads (native: ONNX Runtime, …)"
CONSTRUCTION = "building the pipeline (per call)"
HARNESS = "bench harness (caller audio feed, clocks)"
# Pipecat's own plumbing around the processors: their time is hand-off, not work.
GLUE = {"Pipeline", "PipelineSource", "PipelineSink"}
_QUEUE_TASKS = ("_input_frame_task_handler", "_process_frame_task_handler")


@dataclass
class HookCounts:
    """How often the hooks ran, by the account each run was charged to."""

    steps: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    inside: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # sections entered
    outside: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # sections called


@dataclass(frozen=True)
class HookCost:
    """What one run of each hook adds, in thread nanoseconds, and to whom.

    A task step charges `step_in` to its task's account and `step_gap` to the loop's
    remainder; a timed section charges `section_in` to itself and `section_out` to the
    account that called it. Measured against the same work without the hooks."""

    step_in: float = 0.0
    step_gap: float = 0.0
    section_in: float = 0.0
    section_out: float = 0.0


class Ledger:
    """Exclusive loop-thread CPU per account: each switch charges the time since the last
    one to the account on top of the running task's stack."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.thread_ns: dict[str, int] = defaultdict(int)
        self.hooks = HookCounts()
        self.stack: list[str] | None = None  # the running task's accounts, innermost last
        self._last = 0
        self._thread_lock = threading.Lock()

    def begin_step(self, stack: list[str]) -> None:
        self.hooks.steps[stack[-1]] += 1
        self.stack, self._last = stack, time.thread_time_ns()

    def end_step(self) -> None:
        if self.stack is not None:
            self.ns[self.stack[-1]] += time.thread_time_ns() - self._last
        self.stack = None

    def push(self, account: str) -> list[str] | None:
        stack = self.stack
        if stack is not None:
            now = time.thread_time_ns()
            self.ns[stack[-1]] += now - self._last
            self._last = now
            self.hooks.outside[stack[-1]] += 1
            self.hooks.inside[account] += 1
            stack.append(account)
        return stack

    def pop(self, stack: list[str] | None) -> None:
        if stack is None:
            return
        if stack is self.stack:
            now = time.thread_time_ns()
            self.ns[stack[-1]] += now - self._last
            self._last = now
        stack.pop()  # a coroutine closed outside its task's step charges nothing

    def add_thread(self, account: str, ns: int) -> None:
        with self._thread_lock:
            self.thread_ns[account] += ns


class _Stepped(Coroutine):
    """A task's coroutine whose every step is charged to the ledger."""

    def __init__(self, coro: Coroutine, ledger: Ledger) -> None:
        self._coro, self._ledger = coro, ledger
        self._stack: list[str] | None = None
        self.task: asyncio.Task | None = None

    def send(self, value: Any) -> Any:
        return self._step(self._coro.send, value)

    def throw(self, *args: Any) -> Any:
        return self._step(self._coro.throw, *args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self):
        return (yield from self._coro.__await__())

    def _step(self, method: Callable[..., Any], *args: Any) -> Any:
        if self._stack is None:
            self._stack = [task_account(self.task.get_name() if self.task else "", self._coro)]
        self._ledger.begin_step(self._stack)
        try:
            return method(*args)
        finally:
            self._ledger.end_step()


def task_account(name: str, coro: Coroutine) -> str:
    """Who a task works for: Pipecat names its tasks `Owner#n::method`; others by coroutine."""
    if "::" in name:
        owner, method = name.split("::", 1)[0], name.rsplit("::", 1)[1]
        if method.endswith(_QUEUE_TASKS):
            return HANDOFF
        if method == "_proxy_task_handler":
            return OBSERVER_QUEUES
        return re.sub(r"#\d+$", "", owner)
    code = getattr(coro, "cr_code", None)
    if getattr(code, "co_name", "") in ("run_call", "run_level", "sample_rss"):
        return HARNESS
    return f"task {getattr(code, 'co_qualname', type(coro).__name__)}"


def timed_handler(ledger: Ledger, account: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(handler)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        stack = ledger.push(account)
        try:
            return await handler(*args, **kwargs)
        finally:
            ledger.pop(stack)

    return timed


def timed_callback(ledger: Ledger, account: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """`callback` charged to `account`, run inside a task step or as a loop callback."""
    @functools.wraps(callback)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if ledger.stack is not None:
            stack = ledger.push(account)
            try:
                return callback(*args, **kwargs)
            finally:
                ledger.pop(stack)
        ledger.begin_step([account])
        try:
            return callback(*args, **kwargs)
        finally:
            ledger.end_step()

    return timed


def instrument(worker: PipelineWorker, ledger: Ledger) -> None:
    """Time every processor's frame handling and hand-off, and every observer, of `worker`."""
    for processor in processors_of(worker.pipeline):
        name = type(processor).__name__
        processor.process_frame = timed_handler(ledger, HANDOFF if name in GLUE else name,
                                         processor.process_frame)
        processor.queue_frame = timed_handler(ledger, HANDOFF, processor.queue_frame)
    fanout = worker._observer  # noqa: SLF001 - the worker's one proxy to its observers
    fanout.on_push_frame = timed_handler(ledger, OBSERVER_QUEUES, fanout.on_push_frame)
    for observer in fanout._observers:  # noqa: SLF001
        account = f"observer {type(observer).__name__}"
        observer.on_push_frame = timed_handler(ledger, account, observer.on_push_frame)
        observer.on_process_frame = timed_handler(ledger, account, observer.on_process_frame)


def instrumented(make: MakeWorker, ledger: Ledger) -> MakeWorker:
    """`make`, with its construction timed and what it builds instrumented."""
    def build(transport):
        stack = ledger.push(CONSTRUCTION)
        try:
            worker = make(transport)
        finally:
            ledger.pop(stack)
        instrument(worker, ledger)
        return worker

    return build


def thread_account(fn: Callable[..., Any]) -> str:
    """The function a pool thread runs, through `asyncio.to_thread`'s `context.run` partial."""
    if isinstance(fn, functools.partial):
        inner = fn.args[0] if isinstance(getattr(fn.func, "__self__", None), Context) else fn.func
        return thread_account(inner)
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return f"thread: {type(owner).__name__}.{getattr(fn, '__name__', '?')}"
    return f"thread: {getattr(fn, '__qualname__', type(fn).__name__)}"


@dataclass
class Sample:
    """CPU counters at one moment, in nanoseconds."""

    loop_thread: int
    process: int
    children: dict[int, int]

    @classmethod
    def now(cls) -> Sample:
        me = psutil.Process()
        children = {}
        for child in me.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:
                continue
            children[child.pid] = int((times.user + times.system) * 1e9)
        times = me.cpu_times()
        return cls(time.thread_time_ns(), int((times.user + times.system) * 1e9), children)


class Profiler:
    """Installed on the running loop for one pass: `async with Profiler(labels) as p:`.

    `child_labels` names child processes by pid; `callbacks` are (object, method name,
    account) of work the loop runs outside any task (`loop.call_soon`), timed for the pass.
    The hooks' own cost is measured first (`calibrate`) and taken out of the accounts;
    `hooks_ns` is what was taken out.
    """

    def __init__(self, child_labels: Callable[[], Mapping[int, str]] = dict,
                 callbacks: Iterable[tuple[object, str, str]] = ()) -> None:
        self.ledger = Ledger()
        self._child_labels = child_labels
        self._callbacks = list(callbacks)
        self._start: Sample | None = None
        self.cost = HookCost()
        self.accounts: dict[str, int] = {}
        self.hooks_ns = 0

    async def __aenter__(self) -> Profiler:
        loop = asyncio.get_running_loop()
        plain = await _plain_costs()

        def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine, **kwargs: Any):
            stepped = _Stepped(coro, self.ledger)
            task = asyncio.Task(stepped, loop=loop, **kwargs)
            stepped.task = task
            return task

        self._previous_factory = loop.get_task_factory()
        loop.set_task_factory(factory)
        self.cost = await calibrate(self, plain)
        self.ledger = ledger = Ledger()
        self._submit = ThreadPoolExecutor.submit
        submit = self._submit

        def timed_submit(executor: ThreadPoolExecutor, fn: Callable[..., Any], /, *args, **kwargs):
            account = thread_account(fn)

            def run(*args: Any, **kwargs: Any) -> Any:
                started = time.thread_time_ns()
                try:
                    return fn(*args, **kwargs)
                finally:
                    ledger.add_thread(account, time.thread_time_ns() - started)

            return submit(executor, run, *args, **kwargs)

        ThreadPoolExecutor.submit = timed_submit
        self._replaced = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in self._callbacks]
        for owner, name, account in self._callbacks:
            setattr(owner, name, timed_callback(ledger, account, getattr(owner, name)))
        self._start = Sample.now()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        end = Sample.now()
        for owner, name, own in self._replaced:
            if own is None:
                delattr(owner, name)  # the class's method again
            else:
                setattr(owner, name, own)
        ThreadPoolExecutor.submit = self._submit
        asyncio.get_running_loop().set_task_factory(self._previous_factory)
        labels = self._child_labels()
        children: dict[str, int] = defaultdict(int)
        for pid, ns in end.children.items():
            children[labels.get(pid, "other child processes")] += ns - self._start.children.get(pid, 0)
        self.accounts, self.hooks_ns = accounts(
            loop_ns=dict(self.ledger.ns), thread_ns=dict(self.ledger.thread_ns),
            loop_thread_total=end.loop_thread - self._start.loop_thread,
            process_total=end.process - self._start.process, children_ns=children,
            hooks=self.ledger.hooks, cost=self.cost,
        )


CALIBRATION_RUNS = 20_000


async def _noop() -> None:
    pass


async def _steps(runs: int) -> None:
    for _ in range(runs):
        await asyncio.sleep(0)


async def _sections(runs: int, handler: Callable[[], Any] = _noop) -> None:
    for _ in range(runs):
        await handler()


async def _plain_costs(runs: int = CALIBRATION_RUNS) -> tuple[float, float]:
    """Loop-thread ns per task step and per awaited call, with no hook installed."""
    started = time.thread_time_ns()
    await asyncio.create_task(_steps(runs))
    step = (time.thread_time_ns() - started) / runs
    started = time.thread_time_ns()
    await asyncio.create_task(_sections(runs))
    return step, (time.thread_time_ns() - started) / runs


async def calibrate(profiler: Profiler, plain: tuple[float, float],
                    runs: int = CALIBRATION_RUNS) -> HookCost:
    """The hooks' cost: the same steps and calls as `_plain_costs`, through the hooks."""
    plain_step, plain_call = plain
    profiler.ledger = ledger = Ledger()
    started = time.thread_time_ns()
    await asyncio.create_task(_steps(runs), name="calibration steps::run")
    loop_thread = time.thread_time_ns() - started
    gap = (loop_thread - sum(ledger.ns.values())) / runs
    step_in = ledger.ns["calibration steps"] / runs - plain_call
    profiler.ledger = ledger = Ledger()
    handler = timed_handler(ledger, "calibration section", _noop)
    await asyncio.create_task(_sections(runs, handler), name="calibration calls::run")
    section_out = ledger.ns["calibration calls"] / runs - plain_call
    return HookCost(
        step_in=max(0.0, step_in), step_gap=max(0.0, gap - (plain_step - plain_call)),
        section_in=ledger.ns["calibration section"] / runs, section_out=max(0.0, section_out),
    )


def accounts(*, loop_ns: Mapping[str, int], thread_ns: Mapping[str, int], loop_thread_total: int,
             process_total: int, children_ns: Mapping[str, int],
             hooks: HookCounts | None = None, cost: HookCost = HookCost()) -> tuple[dict[str, int], int]:
    """Every account's CPU with the hooks' estimated cost taken out, the remainders no hook
    saw included, and what was taken out: together they add up to the process's CPU plus
    its children's."""
    result = dict(loop_ns)
    result[LOOP_GAPS] = result.get(LOOP_GAPS, 0) + loop_thread_total - sum(loop_ns.values())
    removed = 0
    if hooks is not None:
        steps = sum(hooks.steps.values())
        for name, ns in result.items():
            estimate = (steps * cost.step_gap if name == LOOP_GAPS else
                        hooks.steps.get(name, 0) * cost.step_in
                        + hooks.inside.get(name, 0) * cost.section_in
                        + hooks.outside.get(name, 0) * cost.section_out)
            taken = min(ns, round(estimate))
            result[name] = ns - taken
            removed += taken
    result.update(thread_ns)
    result[NATIVE_THREADS] = process_total - loop_thread_total - sum(thread_ns.values())
    for label, ns in children_ns.items():
        result[f"process: {label}"] = ns
    return result, removed


@dataclass(frozen=True)
class ProfileRow:
    account: str
    ms_per_audio_s: float  # CPU milliseconds per second of one call's audio
    share: float  # of all the CPU the pass used


def profile_rows(accounts: Mapping[str, int], audio_s: float) -> list[ProfileRow]:
    """Accounts as CPU per second of caller audio and share of the total, costliest first."""
    total = sum(accounts.values())
    rows = [ProfileRow(name, ns / 1e6 / audio_s, ns / total if total else 0.0)
            for name, ns in accounts.items()]
    return sorted(rows, key=lambda row: row.ms_per_audio_s, reverse=True)


def side_by_side(ours: Iterable[ProfileRow], bare: Iterable[ProfileRow],
                 floor_ms: float = 0.05) -> list[tuple[str, ProfileRow | None, ProfileRow | None]]:
    """One line per account, ours' order first, then what only bare spends; accounts
    under `floor_ms` on both sides are left out."""
    ours_by, bare_by = {row.account: row for row in ours}, {row.account: row for row in bare}
    names = list(ours_by) + [name for name in bare_by if name not in ours_by]
    return [(name, ours_by.get(name), bare_by.get(name)) for name in names
            if max(getattr(ours_by.get(name), "ms_per_audio_s", 0.0),
                   getattr(bare_by.get(name), "ms_per_audio_s", 0.0)) >= floor_ms]
