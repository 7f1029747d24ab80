"""Setting up one call, the same way for phone, text and development-runner calls:
its session and record, its context-graph engine, and what its pipeline is built from.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pipecat.transports.base_transport import BaseTransport

from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from db.call_backs import CallBacks, Caller
from db.promised_calls import Callee
from flows.graph_engine import GraphEngine
from flows.graph_session import GraphSession
from flows.llm_navigator import LLMNavigator
from flows.promised_calls import caller_of
from ops.plane import navigator_model
from pipeline.call_deps import CallDeps
from pipeline.factory import CallPipeline, build_call_pipeline
from processors.emotion.call_emotion import CallEmotion
from processors.emotion.fillers import filler_guidance
from processors.voice.greeting_player_processor import PrerenderedSpeech
from runner.runtime import AppRuntime, CallProfile


def new_session(
    runtime: AppRuntime, profile: CallProfile, mode: SessionMode, call_sid: str | None = None,
    caller_number: str | None = None, first_seq: int = 1,
) -> CallSession:
    """The call's session, with its record opened (`in_progress`, `call_started`);
    `first_seq`: past the records a call taken back by the agent already has."""
    graph = runtime.graph_for(profile)
    feed = runtime.ops.feed(
        profile.call_id, profile.workspace_id, service_id=profile.service_id, call_sid=call_sid,
        initial_state=graph.initial_state if graph is not None else None,
        navigator_model=navigator_model(runtime.plan.navigator.provider, runtime.settings),
    )
    log = CallLog(profile.call_id, runtime.writer, observe=feed, first_seq=first_seq)
    session = CallSession(
        identity=CallIdentity(profile.call_id, profile.workspace_id, profile.service_id,
                              caller_number),
        mode=mode, log=log, clinic_name=profile.clinic_name, greeting=profile.greeting,
        call_sid=call_sid,
        keyterms=profile.keyterms, voice=profile.voice,
        config_snapshot=runtime.snapshot(profile),
    )
    log.update_call(
        status="in_progress", connected_at=datetime.now(UTC),
        config_snapshot={**session.config_snapshot, "transport": mode.value},
    )
    log.event("call_started", mode=mode.value)
    for problem in profile.settings_problems:
        log.event("voice_settings_invalid", problem=problem)
    for problem in profile.graph_problems:
        log.event("context_graph_invalid", problem=problem)
    if profile.after_hours is not None:
        log.event("after_hours", **profile.after_hours)
    if profile.outbound is not None:
        outbound = profile.outbound
        log.event("outbound_call", task_id=outbound.task_id, attempt_id=outbound.attempt_id,
                  kind=outbound.kind, graph=outbound.graph_id)
    for problem in profile.calendar_problems:
        log.event("calendar_unavailable", error=problem)
    return session


def graph_engine(
    runtime: AppRuntime, session: CallSession, profile: CallProfile,
    emotion: CallEmotion | None = None,
) -> GraphEngine | None:
    """The call's context-graph engine, or None for static prompt mode."""
    graph = runtime.graph_for(profile)
    if graph is None or session.workspace_id is None or session.service_id is None:
        return None
    booking = GraphSession(identity=session.identity)
    navigator = None
    if runtime.navigator_model is not None:
        navigator = LLMNavigator(
            graph, runtime.navigator_model, session.log, clinic_name=session.clinic_name,
            filler_guidance=lambda: filler_guidance(
                emotion.snapshot() if emotion is not None else None),
        )
    engine = GraphEngine(
        graph, booking, runtime.db.pool, session.log, clinic_name=session.clinic_name,
        emergency_number=runtime.settings.safety.emergency_number, navigator=navigator,
        index=runtime.world_index, practice=runtime.practice,
        dialled_number=profile.dialled_number,
        country_code=runtime.settings.world.phone_country_code,
        outbound=profile.outbound,  # a call the clinic placed: its task
        reach=runtime.reach,
        # a phone call Twilio carries can be handed to a person warmly (runner/handoff.py)
        can_put_through=runtime.handoffs is not None and session.call_sid is not None,
        memory=runtime.settings.memory,
    )
    engine.resume = profile.resume
    return engine


def call_deps(
    runtime: AppRuntime, session: CallSession, profile: CallProfile, *,
    greeting: PrerenderedSpeech | None, sample_rate: int,
) -> CallDeps:
    """What this call's pipeline is built from: the process's providers and this call's
    engine, emotional state and greeting."""
    emotion = CallEmotion() if profile.voice.emotion_enabled else None
    engine = graph_engine(runtime, session, profile, emotion)
    return CallDeps(
        settings=runtime.settings, plan=runtime.plan, engine=engine, emotion=emotion,
        greeting=greeting, greeting_text=profile.greeting,
        recordings_dir=runtime.settings.storage.recordings_dir, sample_rate=sample_rate,
        emotion_providers=runtime.emotion_providers, director=runtime.director,
        safety=runtime.safety, safety_index=profile.safety_index,
        extractor=runtime.extractor, audio_verifier=runtime.audio_verifier,
        call_backs=call_backs(runtime, session, profile, engine),
    )


def call_backs(runtime: AppRuntime, session: CallSession, profile: CallProfile,
               engine: GraphEngine | None) -> CallBacks | None:
    """How the pipeline's own layers ask for a call back: for the caller the engine has
    identified so far, else for the number calling (None: no workspace, no call back)."""
    if session.workspace_id is None:
        return None
    if engine is not None:
        booking = engine.session
        return CallBacks(runtime.db.pool, lambda: caller_of(booking, profile.dialled_number))
    unidentified = Caller(
        workspace_id=session.workspace_id, call_id=session.call_id,
        caller_number=session.caller_number,
        callee=Callee(service_id=session.service_id, dialled_number=profile.dialled_number))
    return CallBacks(runtime.db.pool, lambda: unidentified)


def build_call(
    runtime: AppRuntime, transport: BaseTransport, session: CallSession, profile: CallProfile,
    *, greeting: PrerenderedSpeech | None, sample_rate: int,
) -> CallPipeline:
    """The call's pipeline, from the one bundle every entry path builds alike."""
    deps = call_deps(runtime, session, profile, greeting=greeting, sample_rate=sample_rate)
    return build_call_pipeline(transport, session, deps)
