"""Who a call is: one record per call, shared by everything that needs it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallIdentity:
    """The call's record id, the workspace and service it belongs to, and the caller's
    number (for identifying them; never logged). Set once when the call starts."""

    call_id: str
    workspace_id: str | None = None
    service_id: str | None = None
    caller_number: str | None = None
