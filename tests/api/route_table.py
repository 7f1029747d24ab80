"""The app's route table as the role checks read it: every /api route (HTTP and
WebSocket) with the role it declares (`api.deps.require_role`, `api.deps.socket_role`)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIWebSocketRoute, iter_route_contexts

from api.deps import Role, declared_role

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class ApiRoute:
    method: str  # "WS" for a WebSocket
    path: str
    role: Role | None

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def _dependency_roles(dependant: Dependant | None) -> list[Role]:
    if dependant is None:
        return []
    roles = []
    for dependency in dependant.dependencies:
        if (role := declared_role(dependency.call)) is not None:
            roles.append(role)
        roles += _dependency_roles(dependency)
    return roles


def api_routes(app: FastAPI) -> list[ApiRoute]:
    """Every /api route, one entry per method, with the single role it declares (None:
    none, or more than one)."""
    routes = []
    for context in iter_route_contexts(app.routes):
        path = context.path or ""
        if not path.startswith("/api/") and path != "/api":
            continue
        if isinstance(context.original_route, APIWebSocketRoute):
            routes.append(ApiRoute("WS", path, declared_role(context.endpoint)))
            continue
        roles = set(_dependency_roles(getattr(context, "dependant", None)))
        role = roles.pop() if len(roles) == 1 else None
        routes.extend(ApiRoute(method, path, role) for method in sorted(context.methods or ()))
    return routes
