"""Several worker processes behind one port (`WORKERS`, one per CPU by default).

One Python process runs its calls on one CPU, so `python main.py serve` on a machine
with more starts a supervisor that:

1. does the once-per-machine work (`runner/box.prepare_machine`): starts and holds the
   embedded PostgreSQL when there is no `DATABASE_URL`, migrates, seeds the demo, keeps
   the development credentials, sizes each worker's connection pool;
2. binds the listening socket once (`uvicorn.Config.bind_socket`, as uvicorn's own
   multiprocess supervisor does) and spawns the workers, each serving the whole app on
   that socket (the kernel hands each connection to one of them), with its place on the
   machine (`runner/box.WorkerPlace`) and the machine's shared line counts
   (`lib/shared_slots.py`: `MAX_CONCURRENT_CALLS` is per machine);
3. on SIGTERM / SIGINT asks every worker to drain its own calls (SIGUSR1; a second
   signal: SIGUSR2, end them at once; `api/server.DrainingServer`), and waits for them
   (the drain's bound plus `STOP_MARGIN_S`) before it lets the database go. A worker
   that heard the signal itself (Ctrl-C reaches the whole process group) counts it
   once;
4. starts a worker again when one dies while serving (its calls are closed
   `server_crash` by the others' call sweep, `runner/orphaned_calls.py`), after
   `RESTART_DELAY_S`, doubling while restarts keep failing. A worker that fails at the
   first start stops the whole service: its settings or its port are broken.

A worker whose supervisor dies (SIGKILL) is sent SIGTERM by the kernel and drains.
What crosses processes otherwise goes through the database (a call's set-up from its
answer, the event bus and the registry) or the data directory (rendered greetings).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

from loguru import logger

from api.app import create_app
from api.first_minutes import how_to_get_in
from api.server import DRAIN_REQUEST, HURRY_REQUEST, DrainingServer, server_config
from config import Settings
from lib import event_loop
from lib.log_privacy import configure_logging
from lib.shared_slots import SharedSlots
from lib.worker_processes import end_with_parent
from pipeline.providers import ProviderPlan
from runner.box import PreparedMachine, WorkerPlace, prepare_machine
from runner.runtime import line_slots

RESTART_DELAY_S = 1.0
MAX_RESTART_DELAY_S = 30.0
STOP_MARGIN_S = 30.0  # past the drain: uvicorn's close, the runtime's flush and stop
POLL_S = 0.2
SERVING = "serving"

_spawn = multiprocessing.get_context("spawn")


def run_worker(settings: Settings, place: WorkerPlace, sockets: list[socket.socket],
               ready: Connection, parent_pid: int) -> None:
    """A worker process: the whole app on the supervisor's socket (in the spawned process)."""
    end_with_parent(parent_pid, signal.SIGTERM)  # the supervisor gone: drain, then stop
    name = f"w{place.index + 1}"
    configure_logging(settings.server.log_level, worker=name)
    app = create_app(settings, place)

    def serving(port: int) -> None:
        ready.send((SERVING, port))

    try:
        DrainingServer(server_config(settings, app, worker=name),
                       runtime_of=lambda: getattr(app.state, "runtime", None),
                       on_started=serving).run(sockets=sockets)
    except KeyboardInterrupt:
        pass  # Ctrl-C, re-raised by uvicorn once drained: the supervisor expects this end


@dataclass
class Worker:
    """One worker process as the supervisor sees it."""

    place: WorkerPlace
    process: BaseProcess
    ready: Connection  # the supervisor's end: the worker says when it serves
    started: float = field(default_factory=time.monotonic)
    serving: bool = False


class WorkerSupervisor:
    """Starts, watches, restarts and stops the worker processes (see the module doc)."""

    def __init__(self, settings: Settings, machine: PreparedMachine, count: int,
                 sockets: list[socket.socket]) -> None:
        self.settings = settings
        self.count = count
        self.sockets = sockets
        capacity = ProviderPlan.from_settings(settings).call_capacity(settings)
        self.slots = SharedSlots.shared(count, line_slots(capacity), _spawn)
        self.places = [WorkerPlace(index=i, count=count, slots=self.slots, prepared=True,
                                   db_pool_size=machine.db_pool_size) for i in range(count)]
        self.workers: dict[int, Worker] = {}
        self._restart_at: dict[int, float] = {}
        self._restart_delay = [RESTART_DELAY_S] * count
        self._signals: list[int] = []
        self._stop_by: float | None = None
        self._failed = False
        self._announced = False
        self.port: int | None = None

    def run(self) -> int:
        """Serve until stopped; the exit status (1: a worker could not start)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._signalled)
        for index in range(self.count):
            self._start(index)
        while self.workers or (self._stop_by is None and self._restart_at):
            self._handle_signals()
            if self.workers:
                self._watch()
            else:  # every worker died: only restarts are waited for
                time.sleep(POLL_S)
            self._restart_due()
            if self._stop_by is not None and time.monotonic() > self._stop_by:
                self._kill_all()
        logger.info("every worker process has stopped")
        return 1 if self._failed else 0

    # --- starting ---------------------------------------------------------------------

    def _start(self, index: int) -> None:
        place = self.places[index]
        self.slots.clear_process(index)
        reader, writer = _spawn.Pipe(duplex=False)
        process = _spawn.Process(
            target=run_worker, name=f"worker-{index + 1}",
            args=(self.settings, place, self.sockets, writer, os.getpid()))
        process.start()
        writer.close()  # the worker holds the other copy: its end means EOF here
        self.workers[index] = Worker(place, process, reader)
        logger.info(f"{place.label()} starting (pid {process.pid})")

    def _restart_due(self) -> None:
        now = time.monotonic()
        for index, at in list(self._restart_at.items()):
            if self._stop_by is None and now >= at:
                del self._restart_at[index]
                self._start(index)

    # --- watching ---------------------------------------------------------------------

    def _watch(self) -> None:
        by_handle: dict[object, Worker] = {}
        for worker in self.workers.values():
            by_handle[worker.ready] = worker
            by_handle[worker.process.sentinel] = worker
        for handle in wait(list(by_handle), timeout=POLL_S):
            worker = by_handle[handle]
            if handle is worker.ready:
                self._heard(worker)
            elif not worker.process.is_alive():
                self._ended(worker)

    def _heard(self, worker: Worker) -> None:
        try:
            what, port = worker.ready.recv()
        except (EOFError, OSError, ValueError):
            return  # the worker ended: its sentinel says so
        if what != SERVING or worker.serving:
            return
        worker.serving = True
        self.port = port
        self._restart_delay[worker.place.index] = RESTART_DELAY_S
        logger.info(f"{worker.place.label()} serving (pid {worker.process.pid})")
        if not self._announced and all(w.serving for w in self.workers.values()) \
                and len(self.workers) == self.count:
            self._announced = True
            logger.info(f"{self.count} worker processes serving on port {port}")
            print(how_to_get_in(self.settings, port), flush=True)

    def _ended(self, worker: Worker) -> None:
        index = worker.place.index
        worker.process.join()
        worker.ready.close()
        del self.workers[index]
        self.slots.clear_process(index)
        code = worker.process.exitcode
        if self._stop_by is not None:
            logger.info(f"{worker.place.label()} stopped (exit {code})")
            return
        if not worker.serving and not self._announced:
            logger.error(f"{worker.place.label()} failed to start (exit {code}); stopping")
            self._failed = True
            self._stop(signal.SIGTERM)
            return
        delay = self._restart_delay[index]
        self._restart_delay[index] = min(delay * 2, MAX_RESTART_DELAY_S)
        logger.error(f"{worker.place.label()} (pid {worker.process.pid}) ended with exit "
                     f"{code}; its calls are closed by the call sweep; starting another in "
                     f"{delay:g} s")
        self._restart_at[index] = time.monotonic() + delay

    # --- stopping ---------------------------------------------------------------------

    def _signalled(self, sig: int, _frame: FrameType | None) -> None:
        self._signals.append(sig)

    def _handle_signals(self) -> None:
        while self._signals:
            self._stop(self._signals.pop(0))

    def _stop(self, sig: int) -> None:
        """Ask every worker to drain and stop (again: to end its calls at once)."""
        request = HURRY_REQUEST
        if self._stop_by is None:
            logger.warning(f"{signal.Signals(sig).name}: draining every worker process")
            self._stop_by = (time.monotonic() + self.settings.server.shutdown_drain_s
                             + STOP_MARGIN_S)
            self._restart_at.clear()
            request = DRAIN_REQUEST
        for worker in self.workers.values():
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, request)

    def _kill_all(self) -> None:
        for worker in list(self.workers.values()):
            if worker.process.is_alive():
                logger.error(f"{worker.place.label()} did not stop in time; killed")
                worker.process.kill()


def serve_workers(settings: Settings, count: int) -> int:
    """Prepare the machine, bind the port, run `count` worker processes until stopped."""
    machine = event_loop.run(prepare_machine(settings, count))
    try:
        listener = server_config(settings, app=None).bind_socket()
        supervisor = WorkerSupervisor(settings, machine, count, [listener])
        try:
            return supervisor.run()
        finally:
            listener.close()
            supervisor.slots.remove()
    finally:
        event_loop.run(machine.release())
