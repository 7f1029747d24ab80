"""Every /api route says which role it needs: an HTTP route through
`api.deps.require_role`, a WebSocket through `api.deps.socket_role`. A route added
without one fails here, before any key can reach it with more rights than meant. The
roles of today's routes are pinned too, as the README's role table states them."""

from api.app import create_app
from api.deps import Role
from config import Settings
from tests.api.route_table import api_routes

ADMIN, OPERATOR, READ_ONLY = Role.ADMIN, Role.OPERATOR, Role.READ_ONLY
# The README's role table ("API keys and roles"); routes added since need only a role.
DOCUMENTED = {
    "GET /api/calls": READ_ONLY,
    "GET /api/calls/{call_id}": READ_ONLY,
    "GET /api/calls/{call_id}/events": READ_ONLY,
    "GET /api/calls/{call_id}/recording/stereo": READ_ONLY,
    "GET /api/calls/{call_id}/recording/waveform": READ_ONLY,
    "GET /api/calls/{call_id}/recording/{channel}": READ_ONLY,
    "GET /api/insights/state-guide": READ_ONLY,
    "GET /api/services": READ_ONLY,
    "GET /api/services/{service_id}/keyterms": READ_ONLY,
    "GET /api/voice-settings": READ_ONLY,
    "GET /api/safety-concepts": READ_ONLY,
    "GET /api/me": READ_ONLY,
    "GET /api/calls/active": OPERATOR,
    "WS /api/calls/{call_id}/observe": OPERATOR,
    "WS /api/observe": OPERATOR,
    "POST /api/calls/{call_id}/actions/{action}": OPERATOR,
    "GET /api/escalations": OPERATOR,
    "POST /api/escalations/{escalation_id}/acknowledge": OPERATOR,
    "POST /api/escalations/{escalation_id}/resolve": OPERATOR,
    "GET /api/review-queue": OPERATOR,
    "POST /api/calls/{call_id}/verify": OPERATOR,
    "POST /api/calls/{call_id}/verify-transcript": OPERATOR,
    "PUT /api/voice-settings": ADMIN,
    "PATCH /api/voice-settings": ADMIN,
    "POST /api/safety-concepts": ADMIN,
    "DELETE /api/safety-concepts/{key}": ADMIN,
    "PUT /api/services/{service_id}/keyterms": ADMIN,
    "GET /api/keys": ADMIN,
    "POST /api/keys": ADMIN,
    "DELETE /api/keys/{key_id}": ADMIN,
    "GET /api/workspaces": ADMIN,
    "POST /api/workspaces": ADMIN,
    "GET /api/audit": ADMIN,
}


def test_every_api_route_declares_exactly_one_role(tmp_path):
    routes = api_routes(create_app(Settings(_env_file=None, data_dir=tmp_path)))

    undeclared = [route.label for route in routes if route.role is None]
    assert routes and not undeclared, f"/api routes with no role (or several): {undeclared}"
    assert {route.method for route in routes} >= {"GET", "POST", "WS"}


def test_the_documented_routes_need_the_documented_role(tmp_path):
    routes = {route.label: route.role
              for route in api_routes(create_app(Settings(_env_file=None, data_dir=tmp_path)))}

    assert {label: routes.get(label) for label in DOCUMENTED} == DOCUMENTED
