"""The safety monitor's shared services and what it says when it escalates.

`SafetyServices` holds the process's embedder and judge and the default concepts'
index for that embedder (embedded once, at start-up). `holding_line` is the one line the
agent says when a hard escalation suspends it: the emergency number from the settings,
and a crisis line only if the operator configured (verified) one — otherwise it says it
cannot verify one (it never invents hotline names, numbers or URLs).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from config import CrisisResource
from lib.prompts import render_prompt
from processors.conversation.quick_rules import QuickRules
from processors.safety.concepts import ConceptIndex, SafetyConcept, default_concepts
from processors.safety.judge import SafetyJudge
from services.embeddings import Embedder


@dataclass
class SafetyServices:
    embedder: Embedder
    judge: SafetyJudge
    _index: ConceptIndex | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def index(self) -> ConceptIndex:
        """The default concepts embedded with this embedder (computed once)."""
        if self._index is None:
            async with self._lock:
                if self._index is None:
                    index = ConceptIndex(self.embedder.model, self.embedder.dimension)
                    for concept in default_concepts():
                        index.add(concept, await self.embedder.embed(list(concept.examples)))
                    self._index = index
        return self._index


def concepts_named_by(rules: QuickRules) -> dict[str, SafetyConcept]:
    """The default concepts that quick-observer patterns escalate on their own, by key.
    A key naming no default concept is refused: that rule would escalate nothing."""
    concepts = {c.key: c for c in default_concepts()}
    unknown = sorted(rules.escalated_concepts - concepts.keys())
    if unknown:
        raise ValueError(f"quick patterns escalate unknown safety concepts: {unknown}")
    return {key: concepts[key] for key in rules.escalated_concepts}


def soft_guidance(concept: SafetyConcept) -> str:
    """Guidance for the LLM when a soft concern is raised and the call goes on: a crisis
    concept (thoughts of death) also keeps the call open and the agent with the caller."""
    prompt = "safety/soft_crisis_guidance.txt" if concept.crisis else "safety/soft_guidance.txt"
    return render_prompt(prompt, concept=concept.name.lower())


def holding_line(concept: SafetyConcept, *, emergency_number: str,
                 crisis_resources: list[CrisisResource]) -> str:
    """What the agent says, once, as it hands the call to a human."""
    if not concept.crisis:
        return render_prompt("safety/hold.txt", emergency_number=emergency_number)
    if crisis_resources:
        line = crisis_resources[0]
        crisis_line = render_prompt("safety/crisis_line_known.txt", line_name=line.name,
                                    phone=spoken_digits(line.phone))
    else:
        crisis_line = render_prompt("safety/crisis_line_unknown.txt")
    return render_prompt("safety/crisis_hold.txt", emergency_number=emergency_number,
                         crisis_line=crisis_line)


def spoken_digits(number: str) -> str:
    """A phone number read digit by digit ("988" -> "9 8 8"), as a voice should say it."""
    return " ".join(ch for ch in number if ch.isdigit())
