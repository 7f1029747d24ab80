"""Process-wide state of the service: settings, database, record writer, providers, caches.

Created once at start-up (FastAPI lifespan or the dev runner) and closed at
shutdown, which flushes every queued call record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger
from pydantic import ValidationError

from call.call_session import CallLog
from call.outbound_call import OutboundCall
from call.voice_settings import call_keyterms, parse_voice_settings
from config import Settings
from db import instances, scheduling
from db import repositories as repo
from db.graph_store import graph_version, latest_graph
from db.instances import ProcessIdentity
from db.pool import Database
from db.service_numbers import DialledClinic, dialled_clinic
from db.supervisor import DatabaseSupervisor
from db.writer import CallRecordWriter
from flows.catalog import engine_problems, outbound_problems, runnable_graph
from flows.clinic_calendar import after_hours, with_after_hours
from flows.graph import ContextGraph, GraphError, parse_graph
from flows.navigator import warm_up
from lib.event_loop import BackgroundTasks
from lib.prompts import render_prompt
from lib.shared_slots import SharedSlots
from lib.worker_processes import share_cpus
from ops.plane import OpsPlane
from pipeline.providers import (
    ProviderPlan,
    build_analyst,
    build_audio_verifier,
    build_director,
    build_emotion_providers,
    build_extractor,
    build_memory_extractor,
    build_navigator_model,
    build_safety,
    build_verifier,
)
from processors.conversation.quick_rules import quick_rules
from processors.emotion.warm_up import load_emotion_data
from processors.safety.concept_store import workspace_concepts
from processors.safety.concepts import ConceptIndex
from processors.safety.monitor import concepts_named_by
from processors.world.index import WorldIndex
from runner import call_analysis, post_call
from runner.after_call import verify_after_call
from runner.box import (
    WorkerPlace,
    ensure_dev_api_key,
    ensure_dev_webhook_token,
    prepare_database,
)
from runner.call_profile import CallProfile, StreamSetup
from runner.call_sweeper import CallSweeper, SweepLimits
from runner.drain import CallDrain
from runner.greeting_cache import GreetingCache
from runner.greeting_store import GreetingStore
from runner.handoff import warm_handoffs
from runner.heartbeat import beat_forever
from runner.job_worker import JobKind, JobWorker
from runner.orphaned_calls import close_orphaned_calls
from runner.outbound.pace import DialPace
from runner.reach import build_reach
from services.practice import build_practice
from services.turn_models import load_turn_models

if TYPE_CHECKING:
    from services.espeak.engine import TimedSpeech  # loaded lazily: only the local voice needs it

# A pre-warmed call that never connects expires after 30 s.
PREWARM_TTL_S = 30.0
WORLD_BACKFILL_TIMEOUT_S = 300.0
STARTUP_SWEEP_TIMEOUT_S = 20.0
STOP_RECORD_TIMEOUT_S = 2.0
VERIFY_TIMEOUT_S = 120.0
ANALYSIS_HERE_TIMEOUT_S = 60.0  # a call's analysis run in-process when it cannot be queued


def line_slots(capacity: int) -> int:
    """Room for the machine's line holds: answered and ringing calls never exceed the
    capacity for long (only calls admitted under it are held), so four times it."""
    return 4 * capacity + 32


def answered_line(call_id: str) -> str:
    return f"answered:{call_id}"


def ringing_line(key: str) -> str:
    return f"ringing:{key}"


def load_context_graph(settings: Settings) -> ContextGraph | None:
    """The graph calls run, checked once; None (static prompt mode, logged) if it cannot run."""
    try:
        graph = runnable_graph(settings.call.context_graph)
    except GraphError as error:
        logger.error(f"context graph unavailable, calls run in static prompt mode: {error}")
        return None
    warm_up()  # router rules and the date parser, before the first caller
    logger.info(f"context graph: {graph.id} v{graph.version} ({len(graph.states)} states)")
    return graph


def stop_worker_pools() -> None:
    """Stop the decoder, prosody, grammar and transcript-verification worker processes
    this process started."""
    from processors.world.field_grammar import FieldRecognizer
    from runner.transcript_verification import VerificationDecoder
    from services.pocketsphinx.stt import DecoderPool
    from services.prosody.emotion import ProsodyPool

    for pool in (DecoderPool.started() + ProsodyPool.started() + FieldRecognizer.started()
                 + VerificationDecoder.started()):
        pool.shutdown()


async def queued_or_here(
    db: Any, call_id: str, log: CallLog, queue: Awaitable[Any],
    here: Callable[[], Awaitable[Any]], *, what: str, event: str, timeout_s: float | None = None,
) -> None:
    """Queue a finished call's durable job; if it cannot be queued, do its work here
    instead (within `timeout_s`), and the call's record (`event`) says so. Never raises:
    the call is over."""
    try:
        await db.bounded(queue, what=what)
        return
    except Exception as error:  # noqa: BLE001 - the work still runs, here
        logger.warning(f"call {call_id}: {what} not queued ({type(error).__name__}); "
                       "running it here")
        log.event(event, error=type(error).__name__)
    try:
        async with asyncio.timeout(timeout_s):
            await here()
    except Exception as error:  # noqa: BLE001 - the call is over; its record says so
        logger.warning(f"call {call_id}: {what} not finished here ({type(error).__name__})")


class AppRuntime:
    """Shared by every call in the process."""

    def __init__(self, settings: Settings, db: Database, writer: CallRecordWriter, *,
                 place: WorkerPlace | None = None) -> None:
        self.settings = settings
        self.db = db
        self.writer = writer
        # Which of the machine's worker processes this is (the only one by default).
        self.place = place or WorkerPlace()
        # Restarts the embedded server or reconnects, and replays the spool, while we run.
        self.db_supervisor = DatabaseSupervisor(db, writer, settings.storage)
        self.plan = ProviderPlan.from_settings(settings)
        self.navigator_model = build_navigator_model(self.plan, settings)  # None: the rules
        self.emotion_providers = build_emotion_providers(self.plan, settings)
        self.director = build_director(self.plan, settings)
        self.safety = build_safety(self.plan, settings)
        # The world model's search shares the safety monitor's sentence embedder.
        self.world_index = WorldIndex(self.safety.embedder)
        self.practice = build_practice(settings, db.pool)
        self.reach = build_reach(settings, db.pool)  # texts (and links) beyond the call
        self.handoffs = warm_handoffs(settings, db.pool)  # a person joins the caller
        self.extractor = build_extractor(self.plan, settings)
        self.audio_verifier = build_audio_verifier(self.plan, settings)
        self.verifier = build_verifier(self.plan, settings)
        self.analyst = build_analyst(self.plan, settings)
        self.memory_extractor = build_memory_extractor(self.plan, settings)
        self._background = BackgroundTasks()
        # Calls the machine carries at once, across its worker processes.
        self.call_capacity = self.plan.call_capacity(settings)
        # The machine's lines: each process's running calls, and holds (by key) on the
        # calls answered and about to stream and the outbound calls ringing, shared by
        # every worker process (a call answered in one may stream in another).
        self.lines = (self.place.slots.for_process(self.place.index)
                      if self.place.slots is not None
                      else SharedSlots.local(line_slots(self.call_capacity)))
        self.graph: ContextGraph | None = None
        self._graphs: dict[tuple[Any, ...], tuple[ContextGraph | None, list[str]]] = {}
        # Several worker processes share their renderings through the data folder.
        self.greetings = GreetingCache(self._local_renderer(), None if self.place.alone else
                                       GreetingStore(settings.storage.data_dir / "greetings"))
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # the calendar's now
        # Profiles resolved by this process's answers, for their streams if they come here.
        self._profiles: dict[str, CallProfile] = {}
        # The machine dials at OUTBOUND_DIALS_PER_SECOND at most: each process its share.
        self.dial_pace = DialPace(settings.outbound.dials_per_second / self.place.count)
        # The clinic (workspace, service) each dialled number last reached: a call turned
        # away while the database cannot say is still put on that clinic's record.
        self._clinics: dict[str, tuple[str, str]] = {}
        self.active_calls: dict[str, asyncio.Task] = {}
        # Observer events, the active-call registry, operator commands: across pods with
        # Redis, across this machine's worker processes (and pods) through PostgreSQL.
        self.ops = OpsPlane.from_settings(
            settings, dsn=None if self.place.alone else db.dsn)
        # This process in the database: its calls are its own until it is gone.
        self.identity = ProcessIdentity.current(self.ops.pod_id)
        self.drain = CallDrain()
        # Durable jobs (outbound dialling, practice-system pushes, post-call work).
        self.jobs: JobWorker | None = None
        server = settings.server
        self.sweeper = CallSweeper(
            db.pool, self.identity, settings.storage.recordings_dir, SweepLimits(
                interval_s=server.call_sweep_interval_s,
                never_streamed_after_s=server.never_streamed_after_s,
                stale_after_s=server.instance_stale_after_s,
                unowned_after_s=settings.call.max_call_duration_s + server.instance_stale_after_s,
            ), drop_hold=self.drop_profile)

    @classmethod
    async def start(cls, settings: Settings, place: WorkerPlace | None = None) -> AppRuntime:
        """The process's runtime. A worker process whose supervisor prepared the machine
        (`place.prepared`) joins the database without migrating or seeding it again."""
        place = place or WorkerPlace()
        share_cpus(place.count)  # before any pool of worker processes is sized
        db = await Database.connect(settings, max_size=place.db_pool_size)
        if not place.prepared:
            await prepare_database(db)
        writer = CallRecordWriter(db.pool, settings)
        await writer.start()
        await writer.replay_spool()
        runtime = cls(settings, db, writer, place=place)
        await runtime._take_over_orphans()
        runtime.db_supervisor.start()
        runtime.plan.log()
        logger.info(f"capacity: {runtime.call_capacity} concurrent calls"
                    + ("" if place.alone else f" on this machine ({place.label()})"))
        runtime.graph = load_context_graph(settings)
        load_turn_models()  # VAD + end-of-turn sessions, shared by every call
        load_emotion_data()  # tables, rules and the VADER lexicon, read once
        # The quick observer's patterns, compiled once; the safety concepts they escalate
        # must exist (a misnamed one is refused here, not on the first call).
        concepts_named_by(quick_rules())
        await runtime._prepare_safety()
        await runtime.ops.start()
        runtime.in_background(runtime._prepare_world(), name="world-index")
        if not place.prepared:
            ensure_dev_webhook_token(settings)
        if runtime.plan.stt.provider == "local":
            # Decoder processes take about a second to spawn: do it before the first call.
            from services.pocketsphinx.stt import DecoderPool

            runtime.in_background(DecoderPool.shared().warm_up(), name="decoder-warm-up")
        if runtime.plan.emotion_audio.provider == "local":
            # The prosody analyzer's process: spawned now rather than on a caller's words.
            from services.prosody.emotion import ProsodyPool

            runtime.in_background(ProsodyPool.shared().warm_up(), name="prosody-warm-up")
        if runtime.plan.audio_verification.provider == "local":
            # The grammar pass's process (0.7 s to start): not on a caller's birth date.
            from processors.world.field_grammar import FieldRecognizer

            runtime.in_background(FieldRecognizer.shared().warm_up(), name="grammar-warm-up")
        if db.embedded and not place.prepared:
            await ensure_dev_api_key(settings, db)
        runtime.in_background(beat_forever(db.pool, runtime.identity,
                                           settings.server.instance_heartbeat_s),
                              name="instance-heartbeat")
        runtime.in_background(runtime.sweeper.run(), name="call-sweeper")
        return runtime

    def start_jobs(self, kinds: Mapping[str, JobKind]) -> None:
        """Run the durable queue's jobs of these kinds in this process."""
        self.jobs = JobWorker(self.db.dsn, kinds)
        self.jobs.start()

    async def _take_over_orphans(self) -> None:
        """Register this process, then close the calls a process that is gone left open
        (a crash of this service, or of another pod): bounded, never fatal (the sweeper
        tries again)."""
        started = time.monotonic()
        try:
            closed = await self.db.bounded(self._register_and_close_orphans(),
                                           what="start-up sweep", timeout=STARTUP_SWEEP_TIMEOUT_S)
            if closed:
                logger.info(f"start-up: {len(closed)} orphaned call(s) closed in "
                            f"{time.monotonic() - started:.2f} s")
        except Exception as error:  # noqa: BLE001 - calls can still be taken
            logger.warning(f"start-up: orphaned calls not closed ({type(error).__name__}); "
                           "the sweeper will try again")

    async def _register_and_close_orphans(self) -> list[str]:
        await instances.register(self.db.pool, self.identity)
        return await close_orphaned_calls(
            self.db.pool, self.identity, self.settings.storage.recordings_dir,
            stale_after_s=self.sweeper.limits.stale_after_s,
            unowned_after_s=self.sweeper.limits.unowned_after_s)

    async def _prepare_safety(self) -> None:
        """Embed the default safety concepts now (0.2 s offline); a cloud embedder that
        fails here is retried on the first call's first words."""
        try:
            await asyncio.wait_for(self.safety.index(), 10.0)
        except Exception as error:  # noqa: BLE001 - calls still run; the monitor retries
            logger.warning(f"safety concepts not embedded at start-up ({type(error).__name__})")

    async def _prepare_world(self) -> None:
        """The search indexes for the configured embedders, and vectors for any patient
        or event that has none yet (first start, a model change, a failed write-time
        index): bounded, off every call's path."""
        try:
            async with asyncio.timeout(WORLD_BACKFILL_TIMEOUT_S):
                await self.world_index.prepare(self.db.pool)
                added = await self.world_index.backfill(self.db.pool)
            if added:
                logger.info(f"world model: {added} embeddings added")
        except Exception as error:  # noqa: BLE001 - search still works on what is indexed
            logger.warning(f"world model index not prepared ({type(error).__name__})")

    def verify_soon(self, call_id: str, log: CallLog) -> asyncio.Task:
        """Queue a finished call's post-call work (verify its writes, sync them) as a
        durable job (`runner/post_call.py`). If it cannot be queued it runs here in the
        background (bounded), and the call's record (`log`) says so."""
        return self.in_background(self._queue_post_call(call_id, log), name=f"verify-{call_id}")

    async def _queue_post_call(self, call_id: str, log: CallLog) -> None:
        await queued_or_here(
            self.db, call_id, log, post_call.queue_post_call(self.db.pool, call_id),
            lambda: verify_after_call(
                self.db.pool, log, self.verifier, self.practice, timeout_s=VERIFY_TIMEOUT_S,
                country_code=self.settings.world.phone_country_code),
            what="post-call job", event="post_call_not_queued")

    def analyse_soon(self, call_id: str, log: CallLog) -> asyncio.Task:
        """Queue a finished call's analysis (summary, quality score, memories) as a durable
        job (`runner/call_analysis.py`). If it cannot be queued it runs here in the
        background (bounded), and the call's record (`log`) says so."""
        return self.in_background(self._queue_analysis(call_id, log), name=f"analyse-{call_id}")

    def analysis_parts(self) -> call_analysis.CallAnalysisParts:
        return call_analysis.CallAnalysisParts(
            self.db.pool, self.writer, self.analyst, memory=self.memory_extractor,
            embedder=self.safety.embedder, memory_policy=self.settings.memory)

    async def _queue_analysis(self, call_id: str, log: CallLog) -> None:
        await queued_or_here(
            self.db, call_id, log, call_analysis.queue_call_analysis(self.db.pool, call_id),
            lambda: call_analysis.run_call_analysis(self.analysis_parts(), {"call_id": call_id}),
            what="call analysis job", event="call_analysis_not_queued",
            timeout_s=ANALYSIS_HERE_TIMEOUT_S)

    def in_background(self, work: Any, *, name: str) -> asyncio.Task:
        """Run `work` off every call's path; kept until done, cancelled at close."""
        return self._background.start(work, name=name)

    async def close(self) -> None:
        if self.jobs is not None:
            await self.jobs.close()
        await self.db_supervisor.close()
        self._background.cancel()
        await self.world_index.drain()
        for task in list(self.active_calls.values()):
            task.cancel()
        if self.active_calls:
            await asyncio.gather(*self.active_calls.values(), return_exceptions=True)
        await self.ops.close()
        await self.writer.close(timeout=self.settings.storage.db_write_timeout_s * 2)
        await self._stopped()
        close_practice = getattr(self.practice, "aclose", None)
        if close_practice is not None:
            await close_practice()
        await self.db.close()
        await asyncio.to_thread(stop_worker_pools)

    async def _stopped(self) -> None:
        """Say this process stopped cleanly (whatever it left open is no one's now)."""
        try:
            await self.db.bounded(instances.stopped(self.db.pool, self.identity),
                                  what="clean stop", timeout=STOP_RECORD_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - its dead PID tells the same, later
            logger.warning(f"clean stop not recorded ({type(error).__name__})")

    # --- Calls -----------------------------------------------------------------

    async def resolve_profile(self, call_id: str, to_number: str | None, *,
                              timeout: float | None = None) -> CallProfile:
        """Workspace, clinic, keyterms and voice settings for a call; defaults if the DB
        does not answer within `timeout` (default DB_REQUEST_TIMEOUT_S)."""
        try:
            return await self.db.bounded(self._load_profile(call_id, to_number),
                                         what="call profile", timeout=timeout)
        except Exception as error:
            logger.warning(f"call {call_id}: profile lookup failed ({type(error).__name__}); defaults")
            return self._default_profile(call_id, None, None, "the clinic", [], None)

    async def dialled_clinic(self, number: str | None) -> DialledClinic:
        """The clinic a call to `number` reaches (None: a session with no number): its
        owner, else the fallback number's clinic, else the deployment's only clinic, else
        none. Remembered for the calls turned away while the database cannot say."""
        found = await dialled_clinic(
            self.db.pool, number, fallback_number=self.settings.telephony.unknown_number_fallback)
        self.note_clinic(number, found.service)
        return found

    async def _load_profile(self, call_id: str, to_number: str | None) -> CallProfile:
        found = await self.dialled_clinic(to_number)
        service = found.service
        if service is None:
            logger.warning(f"call {call_id or '(new)'}: the number reaches no clinic (several "
                           "clinics or none, and no UNKNOWN_NUMBER_FALLBACK); no workspace")
            profile = self._default_profile(call_id, None, None, "the clinic", [], None)
            profile.in_service = False
            return profile
        profile = await self.clinic_profile(
            call_id, service, service.get("graph_id") or self.settings.call.context_graph)
        profile.dialled_number = to_number
        await self._after_hours(profile, service["id"], to_number)
        return profile

    async def clinic_profile(self, call_id: str, service: dict[str, Any],
                             graph_id: str) -> CallProfile:
        """What any call of the clinic (`service`, a SERVICE_COLUMNS row) runs with,
        inbound or outbound: its workspace's voice settings, keyterms and safety concepts,
        and the clinic's version of the graph `graph_id`."""
        raw = await repo.get_voice_settings_raw(self.db.pool, service["workspace_id"])
        profile = self._default_profile(
            call_id, service["workspace_id"], service["id"], service["name"],
            list(service.get("keyterms") or []), raw, greeting=service.get("greeting"),
        )
        profile.graph, profile.graph_problems = await self._service_graph(
            service["workspace_id"], service["id"], graph_id)
        profile.safety_index = await self._safety_index(service["workspace_id"])
        return profile

    async def outbound_profile(self, call_id: str, service: dict[str, Any],
                               outbound: OutboundCall, *, greeting: str,
                               clinic_number: str | None) -> CallProfile:
        """A call the clinic placed for an outbound task, answered by a person: the
        clinic's profile running the task's graph, greeting the callee with `greeting`."""
        profile = await self.clinic_profile(call_id, service, outbound.graph_id)
        profile.greeting = greeting
        profile.outbound = outbound
        profile.dialled_number = clinic_number
        self._outbound_graph(profile, outbound.graph_id)
        return profile

    def _outbound_graph(self, profile: CallProfile, graph_id: str) -> None:
        """A call the clinic places runs only a graph that checks who answered before
        anything about their care is said: a stored version without that check gives way
        to the bundled graph, and with neither the profile has no graph (the call is not
        put through)."""
        if profile.graph is None or not (problems := outbound_problems(profile.graph)):
            return
        logger.error(f"graph {graph_id} v{profile.graph.version} cannot carry an outbound "
                     f"call ({'; '.join(problems)}); using the bundled one")
        bundled, bundled_problems = self._bundled(graph_id)
        safe = bundled is not None and not outbound_problems(bundled)
        profile.graph = bundled if safe else None
        profile.graph_problems = [*profile.graph_problems,
                                  f"not for outbound calls: {'; '.join(problems)}"[:300],
                                  *bundled_problems]

    async def _after_hours(self, profile: CallProfile, service_id: str,
                           dialled: str | None) -> None:
        """A caller who rings while the dialled location (else every location) is closed
        hears so in the greeting, with the next opening, and that they can still book,
        leave a message or get the emergency number. A calendar that cannot be read
        leaves the plain greeting, and the reason goes on the call's record."""
        try:
            now = self.clock()
            closed = after_hours(
                await scheduling.locations(self.db.pool, service_id),
                await scheduling.closures(self.db.pool, service_id,
                                          now.date() - timedelta(days=1)),
                now, dialled=dialled, emergency_number=self.settings.safety.emergency_number)
        except Exception as error:  # noqa: BLE001 - the greeting goes on without it
            logger.warning(f"call {profile.call_id}: opening hours not read "
                           f"({type(error).__name__})")
            profile.calendar_problems.append(type(error).__name__)
            return
        if closed is not None:
            profile.greeting = with_after_hours(profile.greeting, closed.line)
            profile.after_hours = closed.event()

    async def _safety_index(self, workspace_id: str) -> ConceptIndex | None:
        """The workspace's own safety concepts beside the defaults, if it has any (the
        defaults alone if they cannot be read: they are always active)."""
        try:
            extra = await workspace_concepts(self.db.pool, workspace_id, self.safety.embedder)
        except Exception as error:  # noqa: BLE001 - the defaults still protect the call
            logger.warning(f"workspace safety concepts unavailable ({type(error).__name__})")
            return None
        if not extra:
            return None
        return (await self.safety.index()).with_concepts(extra)

    def _default_profile(
        self, call_id: str, workspace_id: str | None, service_id: str | None, clinic: str,
        service_keyterms: list[str], raw_voice: Any, greeting: str | None = None,
    ) -> CallProfile:
        voice, problems = parse_voice_settings(raw_voice)
        return CallProfile(
            call_id=call_id,
            workspace_id=workspace_id,
            service_id=service_id,
            clinic_name=clinic,
            greeting=greeting or render_prompt("greeting.txt", clinic_name=clinic),
            keyterms=call_keyterms(service_keyterms, voice, self.settings.call.system_keyterms),
            voice=voice,
            settings_problems=problems,
        )

    def remember_profile(self, profile: CallProfile) -> None:
        """Keep a profile resolved at answer time for the media stream (30 s TTL), and hold
        the machine's line for it meanwhile, whichever worker process the stream reaches."""
        now = time.monotonic()
        for key in [k for k, p in self._profiles.items() if now - p.created > PREWARM_TTL_S]:
            del self._profiles[key]
        self._profiles[profile.call_id] = profile
        self._hold_line(answered_line(profile.call_id), PREWARM_TTL_S)

    def note_clinic(self, number: str | None, service: dict[str, Any] | None) -> None:
        """Remember the service a dialled number was found to reach (None: nothing)."""
        if number and service is not None:
            self._clinics[number] = (str(service["workspace_id"]), str(service["id"]))

    def known_clinic(self, number: str | None) -> tuple[str | None, str | None]:
        """(workspace, service) a dialled number last reached; (None, None) if never seen."""
        return self._clinics.get(number or "", (None, None))

    def calls_in_hand(self) -> int:
        """The machine's calls: running here and in its other worker processes, answered
        and about to stream, and outbound calls dialled and ringing."""
        return self.lines.total(len(self.active_calls))

    def outbound_has_room(self) -> bool:
        """Room to dial one more outbound call: inbound callers come first, so outbound
        calls stop `OUTBOUND_INBOUND_RESERVE` lines short of the capacity (a process with
        fewer lines than that may still place one call when it holds none)."""
        limit = max(1, self.call_capacity - self.settings.outbound.inbound_reserve)
        return self.has_capacity() and self.calls_in_hand() < limit

    def hold_ringing(self, key: str) -> None:
        """A dialled outbound call holds a line until it is answered or ends (or
        OUTBOUND_RING_HOLD_S passes), so callers are never admitted past capacity."""
        self._hold_line(ringing_line(key), self.settings.outbound.ring_hold_s)

    def release_ringing(self, key: str) -> None:
        self.lines.release(ringing_line(key))

    def _hold_line(self, name: str, ttl_s: float) -> None:
        if not self.lines.hold(name, ttl_s):
            logger.warning("line holds full: the oldest hold was given up for a new one")

    def call_running(self, call_id: str, task: asyncio.Task) -> None:
        """A call runs in this process (every worker process counts it at once)."""
        self.active_calls[call_id] = task
        self.lines.set_count(len(self.active_calls))

    def call_done(self, call_id: str) -> None:
        self.active_calls.pop(call_id, None)
        self.lines.set_count(len(self.active_calls))

    def graph_for(self, profile: CallProfile) -> ContextGraph | None:
        """The graph a call's engine runs (None: static prompt mode); it needs a clinic."""
        if profile.workspace_id is None or profile.service_id is None:
            return None
        return profile.graph

    def snapshot(self, profile: CallProfile) -> dict[str, Any]:
        """What this call runs with, for calls.config_snapshot."""
        return profile.snapshot(self.plan, self.graph_for(profile))

    async def service_graph(self, workspace_id: str, service_id: str) -> ContextGraph | None:
        """The graph the service's calls run now (None: it has none that can run)."""
        service = await self.db.pool.fetchrow(
            "SELECT graph_id FROM services WHERE id = $1 AND workspace_id = $2",
            repo.as_uuid(service_id), repo.as_uuid(workspace_id))
        if service is None:
            return None
        graph, _problems = await self._service_graph(
            workspace_id, service_id, service["graph_id"] or self.settings.call.context_graph)
        return graph

    async def _service_graph(
        self, workspace_id: str, service_id: str, graph_id: str
    ) -> tuple[ContextGraph | None, list[str]]:
        """The service's latest stored graph version, else the bundled graph (checked, cached)."""
        definition = await latest_graph(self.db.pool, workspace_id, service_id, graph_id)
        if definition is None:
            return self._bundled(graph_id)
        return self._parsed(workspace_id, definition, graph_id)

    def _parsed(self, workspace_id: str, definition: dict[str, Any], graph_id: str
                ) -> tuple[ContextGraph | None, list[str]]:
        """A stored definition parsed and checked once (the bundled graph when it cannot run)."""
        key = (workspace_id, definition.get("id"), definition.get("version"))
        if key not in self._graphs:
            try:
                graph = parse_graph(definition, f"stored graph {graph_id}")
                problems = engine_problems(graph)
                if problems:
                    raise GraphError("; ".join(problems))
                self._graphs[key] = (graph, [])
            except GraphError as error:
                logger.error(f"stored graph {graph_id} cannot run, using the bundled one: {error}")
                bundled, problems = self._bundled(graph_id)
                self._graphs[key] = (bundled, [str(error)[:300], *problems])
        return self._graphs[key]

    def _bundled(self, graph_id: str) -> tuple[ContextGraph | None, list[str]]:
        """The graph shipped as flows/graphs/<graph_id>.yaml, checked once (None: it cannot
        run here, and calls use static prompt mode)."""
        key = ("bundled", graph_id)
        if key not in self._graphs:
            if self.graph is not None and self.graph.id == graph_id:
                self._graphs[key] = (self.graph, [])
            else:
                try:
                    self._graphs[key] = (runnable_graph(graph_id), [])
                except GraphError as error:
                    logger.error(f"graph {graph_id} cannot run: {error}")
                    self._graphs[key] = (None, [str(error)[:300]])
        return self._graphs[key]

    def has_capacity(self) -> bool:
        """Room for one more call (none while draining: the next pod takes it)."""
        return not self.drain.draining and self.calls_in_hand() < self.call_capacity

    def drop_profile(self, call_id: str) -> None:
        """Free the capacity held for an answered call that will not stream (answered
        here or by another worker process)."""
        self._profiles.pop(call_id, None)
        self.lines.release(answered_line(call_id))

    def take_profile(self, call_id: str) -> CallProfile | None:
        """The profile this process resolved at the answer (None: it answered elsewhere,
        or too long ago); the line held for the answer is let go either way."""
        self.lines.release(answered_line(call_id))
        profile = self._profiles.pop(call_id, None)
        if profile is not None and time.monotonic() - profile.created > PREWARM_TTL_S:
            return None
        return profile

    def stream_setup(self, profile: CallProfile) -> dict[str, Any]:
        """What the process that gets the call's media stream needs to run it (stored
        with the call at the answer; `runner/call_profile.py`)."""
        graph = profile.graph
        bundled = self._graphs.get(("bundled", graph.id), (None, []))[0] if graph else None
        stored = graph is not None and graph is not bundled
        return profile.stream_setup(graph_stored=stored).model_dump(mode="json")

    async def restore_profile(self, call_id: str, raw: Any) -> CallProfile | None:
        """The profile another process resolved at the answer, from its stored setup (None:
        none stored, or unreadable). Reads the database only for a graph version this
        process has not parsed yet and for a workspace's own safety concepts."""
        if raw is None:
            return None
        try:
            setup = StreamSetup.model_validate(raw)
        except ValidationError:
            logger.warning(f"call {call_id}: stored call setup unreadable; resolving again")
            return None
        graph = await self._setup_graph(setup)
        safety_index = (await self._safety_index(setup.workspace_id)
                        if setup.workspace_safety_concepts and setup.workspace_id else None)
        return setup.profile(call_id, graph=graph, safety_index=safety_index)

    async def _setup_graph(self, setup: StreamSetup) -> ContextGraph | None:
        """The graph a stored setup names: the bundled one, else the stored version (from
        this process's cache, else the database; its latest when that version is gone)."""
        ref = setup.graph
        if ref is None:
            return None
        if not ref.stored:
            return self._bundled(ref.id)[0]
        workspace_id, service_id = setup.workspace_id, setup.service_id
        if workspace_id is None:
            return None
        cached = self._graphs.get((workspace_id, ref.id, ref.version))
        if cached is not None:
            return cached[0]
        definition = await graph_version(self.db.pool, workspace_id, service_id, ref.id,
                                         ref.version)
        if definition is None:
            graph, _problems = await self._service_graph(workspace_id, service_id or "", ref.id)
            return graph
        return self._parsed(workspace_id, definition, ref.id)[0]

    # --- Helpers ---------------------------------------------------------------

    def _local_renderer(self):
        if self.plan.tts.provider != "local":
            return None
        wpm = self.settings.providers.local_tts_words_per_minute
        voice = self.settings.providers.local_tts_voice

        async def render(text: str, sample_rate: int, speed: float) -> TimedSpeech:
            from services.espeak.engine import synthesize_timed
            from services.espeak.tts import words_per_minute_for

            rate = words_per_minute_for(speed, wpm)  # the same rate live synthesis uses
            return await synthesize_timed(text, sample_rate, voice=voice, words_per_minute=rate)

        return render
