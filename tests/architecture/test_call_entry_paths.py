"""Phone, text and development-runner calls are built the same way: from one bundle
(`runner/call_setup.call_deps`), so none of them can run without a layer the settings
choose."""

import ast
import uuid

from bench.harness import MemoryTransport
from call.call_session import SessionMode
from db import repositories as repo
from runner.call_setup import build_call, call_deps, new_session
from runner.runtime import AppRuntime
from tests.architecture.import_graph import project_modules
from tests.worker_pools import pools_left_to_the_next_app

# Only these differ with the way the caller reaches us: what hears them (the typed-text
# bridge instead of an STT) and the taps on the caller's audio.
TRANSPORT_SPECIFIC = {"TextInputProcessor", "CallerAudioEndProcessor", "AudioTapProcessor"}
OURS = ("processors.", "flows.", "observers.", "turns.")


def _entry_calls(module: str, function: str) -> set[str]:
    tree = ast.parse(project_modules()[module].read_text())
    [node] = [n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function]
    return {c.func.id for c in ast.walk(node)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}


def test_each_entry_path_builds_its_call_through_the_call_setup():
    assert "build_call" in _entry_calls("runner.call_runner", "_phone_pipeline")
    assert "build_call" in _entry_calls("runner.call_runner", "_serve_text_session")
    assert "build_call" in _entry_calls("runner.dev_runner", "run_dev_session")




def _processor_names(call) -> list[str]:
    found = []

    def walk(processor):
        for child in getattr(processor, "processors", []) or []:
            walk(child)
        kind = type(processor)
        if kind.__module__.startswith(OURS) and kind.__name__ not in TRANSPORT_SPECIFIC:
            found.append(kind.__name__)

    walk(call.worker.pipeline)
    return found


async def test_phone_text_and_browser_calls_get_the_same_layers_and_providers(
    settings, db, workspace_id
):
    number = f"+1555{uuid.uuid4().int % 10**7:07d}"
    await repo.create_service(db.pool, workspace_id, "Layered Clinic", phone_number=number)
    runtime = await AppRuntime.start(settings)
    try:
        built = {}
        for mode in (SessionMode.PHONE, SessionMode.TEXT, SessionMode.WEBRTC):
            profile = await runtime.resolve_profile("", number)
            profile.call_id = await repo.create_call(
                db.pool, workspace_id=workspace_id, service_id=profile.service_id,
                call_sid=None, direction="eval", from_number=None, to_number=number,
                status="ringing")
            session = new_session(runtime, profile, mode)
            deps = call_deps(runtime, session, profile, greeting=None, sample_rate=8000)
            assert deps.extractor is runtime.extractor
            assert deps.audio_verifier is runtime.audio_verifier
            assert deps.director is runtime.director and deps.safety is runtime.safety
            assert deps.call_backs is not None  # the no-LLM responder and time limit
            built[mode] = _processor_names(build_call(
                runtime, MemoryTransport(8000), session, profile, greeting=None,
                sample_rate=8000))
    finally:
        with pools_left_to_the_next_app():
            await runtime.close()
    assert "WorldExtractorProcessor" in built[SessionMode.PHONE]
    assert "GraphNavigatorProcessor" in built[SessionMode.PHONE]
    assert built[SessionMode.TEXT] == built[SessionMode.PHONE]
    assert built[SessionMode.WEBRTC] == built[SessionMode.PHONE]
