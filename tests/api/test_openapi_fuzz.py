"""Fuzz every /api operation of the app's own OpenAPI spec in-process (schemathesis over
ASGI, with the app's lifespan and a valid key): no 500s, and every documented response
matches its schema. New routes are fuzzed as soon as they are in the spec.

Voice paths (/voice/*, /ws) stay out: they are webhooks and media streams with their
own signature checks and tests. Examples per operation are bounded to keep the run short.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.python import asgi as schemathesis_asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from config import Settings
from db import repositories as repo
from db.clinic.file import parse_clinic_text
from db.clinic.store import import_clinic
from tests.api.app_client import bearer
from tests.api.test_clinics_api import clinic_text, fictional_number

EXAMPLES_PER_OPERATION = 40
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
# Operations that also document every status they answer (auth, rate limit, not found).
FULLY_DOCUMENTED = {"GET /api/calls", "GET /api/calls/{call_id}", "GET /api/keys",
                    "POST /api/keys", "DELETE /api/keys/{key_id}"}


@pytest.fixture
async def fuzz_key(db, workspace_id, call_id) -> str:
    """A valid key of a workspace with one finished call that has a turn, a failed tool
    call and an open escalation (so fuzzed requests on it reach real rows)."""
    call = repo.as_uuid(call_id)
    await repo.update_call(db.pool, call_id, status="completed", completion_reason="caller_hangup")
    await db.pool.execute(
        "INSERT INTO turns (call_id, seq, speaker_id, speaker_role, text, words) "
        "VALUES ($1, 1, 'caller', 'caller', 'hello', $2)", call,
        [{"word": "hello", "start_ms": 0, "end_ms": 400}])
    await db.pool.execute(
        "INSERT INTO tool_calls (call_id, tool_call_id, name, succeeded, error_class) "
        "VALUES ($1, 'tc-1', 'book', false, 'pms')", call)
    await db.pool.execute(
        "INSERT INTO escalations (call_id, seq, concept, severity) "
        "VALUES ($1, 1, 'self_harm', 'hard')", call)
    return await repo.create_api_key(db.pool, workspace_id, "fuzz")


@pytest.fixture
async def clinic_id(db, workspace_id) -> str:
    """A clinic of the fuzzed workspace, so clinic routes are fuzzed on a real one."""
    source = clinic_text(f"Fuzz Clinic {uuid.uuid4().hex[:6]}", fictional_number())
    result = await import_clinic(db.pool, workspace_id, parse_clinic_text(source))
    return result.service_id


@pytest.fixture
def app_schema(fuzz_key, pg_dsn, tmp_path) -> Iterator[schemathesis.BaseSchema]:
    """The app's spec, served by the app itself; its lifespan runs on schemathesis's loop."""
    app = create_app(Settings(
        _env_file=None, data_dir=tmp_path, database_url=pg_dsn,
        api_rate_limit_per_minute=1_000_000,  # the fuzzer is one key sending many requests
    ))
    try:
        yield schemathesis.openapi.from_asgi("/openapi.json", app).include(path_regex=r"^/api/")
    finally:
        schemathesis_asgi.shutdown_lifespans()  # the app's runtime, before the database goes


def case_strategy(operation, targets: dict[str, str]):
    """Valid and invalid inputs alike, and valid ones aimed at a real row (a call, a
    clinic) when the path names one (`targets`: path parameter → a real id)."""
    strategies = [operation.as_strategy(GenerationMode.POSITIVE),
                  operation.as_strategy(GenerationMode.NEGATIVE)]
    for name, value in targets.items():
        if f"{{{name}}}" in operation.path:
            strategies.append(operation.as_strategy(
                GenerationMode.POSITIVE, path_parameters={name: value}))
    return st.one_of(strategies)


def fuzz_operation(operation, key: str, targets: dict[str, str]) -> str | None:
    """Run one operation's bounded examples; what failed (with the input), or None."""

    @given(case=case_strategy(operation, targets))
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True,
              database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        case.call_and_validate(headers=bearer(key), checks=checks)

    checks = CHECKS + ([status_code_conformance] if operation.label in FULLY_DOCUMENTED else [])

    try:
        run()
    except Exception as error:  # noqa: BLE001 - every failure is reported, with its route
        return f"{operation.label}: {error}"
    return None


def test_no_server_errors_and_responses_match_the_spec(app_schema, fuzz_key, call_id,
                                                        clinic_id):
    # schemathesis's own pytest plugin (`parametrize`, `from_fixture`) does not run on
    # pytest 9, so operations are driven here through their Hypothesis strategies.
    operations = [result.ok() for result in app_schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert FULLY_DOCUMENTED <= labels
    failures = [failure for operation in operations
                if (failure := fuzz_operation(
                    operation, fuzz_key, {"call_id": call_id, "clinic_id": clinic_id}))
                is not None]
    assert not failures, "\n\n".join(failures)
