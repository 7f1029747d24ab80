"""What a call needs before its audio starts (`CallProfile`), and the part of it that
travels from the process that answered the call to the one its media stream reaches.

The answer webhook resolves the profile while the phone rings; the media stream may
reach another worker process of the machine, or another pod (the kernel, or the load
balancer, hands each connection to any). So the answer stores the profile's
`StreamSetup` with the call (`db/repositories.create_call`), and the process that
claims the stream rebuilds the profile from it (`AppRuntime.restore_profile`) without
resolving anything again: the graph comes from that process's cache by id and version,
the workspace's safety concepts are read only when the workspace has any.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from call.outbound_call import OutboundCall
from call.voice_settings import VoiceSettings
from flows.graph import ContextGraph
from pipeline.providers import ProviderPlan
from processors.safety.concepts import ConceptIndex

SETUP_VERSION = 1


@dataclass
class CallProfile:
    """What a call needs before its audio starts, resolved while the phone rings."""

    call_id: str
    workspace_id: str | None
    service_id: str | None
    clinic_name: str
    greeting: str
    keyterms: list[str]
    voice: VoiceSettings
    settings_problems: list[str] = field(default_factory=list)
    graph: ContextGraph | None = None  # the graph this service's calls run (None: static)
    graph_problems: list[str] = field(default_factory=list)
    # The default safety concepts plus the workspace's own (None: the defaults alone).
    safety_index: ConceptIndex | None = None
    dialled_number: str | None = None  # picks the location in the ambient context
    # False: no clinic owns the dialled number and no rule gives it one
    # (db/service_numbers.py); the call belongs to no workspace.
    in_service: bool = True
    # Rung while the clinic (or the dialled location) is closed: what the greeting added.
    after_hours: dict[str, Any] | None = None
    calendar_problems: list[str] = field(default_factory=list)  # why it could not say
    # A call the clinic placed: the task it carries out (None: a call someone made to us).
    outbound: OutboundCall | None = None
    # (state, action) a call taken back by the agent goes on from (None: the start).
    resume: tuple[str, str] | None = None
    created: float = field(default_factory=time.monotonic)

    def snapshot(self, plan: ProviderPlan, graph: ContextGraph | None) -> dict[str, Any]:
        """The configuration this call ran with (stored in calls.config_snapshot)."""
        outbound = ({"outbound": {"task_id": self.outbound.task_id, "kind": self.outbound.kind,
                                  "attempt_id": self.outbound.attempt_id}}
                    if self.outbound is not None else {})
        return {
            **outbound,
            "providers": plan.snapshot(),
            "context_graph": (
                {"id": graph.id, "version": graph.version, "navigator": plan.navigator.provider,
                 "engage": "llm" if plan.has_llm else "local lines"}
                if graph is not None else {"mode": "static prompt"}
            ),
            "graph_problems": self.graph_problems,
            "service_id": self.service_id,
            "voice_settings": self.voice.model_dump(mode="json"),
            "keyterms": self.keyterms,
        }


    def stream_setup(self, *, graph_stored: bool) -> StreamSetup:
        """What another process needs to run this call (`graph_stored`: the graph is a
        stored version of the workspace's, not the one bundled with the code)."""
        graph = (SetupGraph(id=self.graph.id, version=self.graph.version, stored=graph_stored)
                 if self.graph is not None else None)
        return StreamSetup(
            version=SETUP_VERSION, workspace_id=self.workspace_id, service_id=self.service_id,
            clinic_name=self.clinic_name, greeting=self.greeting, keyterms=self.keyterms,
            voice=self.voice, settings_problems=self.settings_problems, graph=graph,
            graph_problems=self.graph_problems,
            workspace_safety_concepts=self.safety_index is not None,
            dialled_number=self.dialled_number, in_service=self.in_service,
            after_hours=self.after_hours, calendar_problems=self.calendar_problems,
            outbound=asdict(self.outbound) if self.outbound is not None else None,
        )


class SetupGraph(BaseModel):
    """Which graph a call runs: its id and version, stored by the workspace or bundled."""

    model_config = ConfigDict(extra="ignore")

    id: str
    version: int
    stored: bool


class StreamSetup(BaseModel):
    """A `CallProfile` as stored with its call between the answer and the stream."""

    model_config = ConfigDict(extra="ignore")

    version: int
    workspace_id: str | None
    service_id: str | None
    clinic_name: str
    greeting: str
    keyterms: list[str]
    voice: VoiceSettings
    settings_problems: list[str] = []
    graph: SetupGraph | None = None
    graph_problems: list[str] = []
    workspace_safety_concepts: bool = False
    dialled_number: str | None = None
    in_service: bool = True
    after_hours: dict[str, Any] | None = None
    calendar_problems: list[str] = []
    outbound: dict[str, Any] | None = None

    def profile(self, call_id: str, *, graph: ContextGraph | None,
                safety_index: ConceptIndex | None) -> CallProfile:
        """The profile again, with the graph and safety concepts this process holds."""
        return CallProfile(
            call_id=call_id, workspace_id=self.workspace_id, service_id=self.service_id,
            clinic_name=self.clinic_name, greeting=self.greeting, keyterms=list(self.keyterms),
            voice=self.voice, settings_problems=list(self.settings_problems), graph=graph,
            graph_problems=list(self.graph_problems), safety_index=safety_index,
            dialled_number=self.dialled_number, in_service=self.in_service,
            after_hours=self.after_hours, calendar_problems=list(self.calendar_problems),
            outbound=OutboundCall(**self.outbound) if self.outbound is not None else None,
        )
