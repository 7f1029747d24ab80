"""No spoken line promises a call from the clinic unless some code writes its task first.

Every line file under prompts/ is scanned for the clinic calling the caller ("call you
back", "we'll call you", "a callback"). Each line found is listed below, either as a
promise with the code path that writes its task before the line can be said, or as a
line that promises nothing (an offer or a question, a call declined or not arranged, a
call being returned). A new line that speaks of a call from the clinic fails here until
it is listed, so no line can promise a call silently.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from lib.prompts import PROMPTS_DIR

# The clinic calling the caller, in the words the lines use.
CALL_FROM_THE_CLINIC = re.compile(
    r"\b(?:call|ring|phone)\s+(?:you|them)\b|\bcall ?backs?\b|\b(?:we'll|will|we will) "
    r"(?:call|ring|phone)\b", re.IGNORECASE)



@dataclass(frozen=True)
class Guarantee:
    """The code that writes a promise's task before its line can be said, and how."""

    code: str
    how: str
    says_when: bool = True  # the line names the time its task will be dialled


ESCALATE = Guarantee(
    "flows.graph_tools.GraphTools._escalate",
    "EscalateToHuman writes the request and its callback task together "
    "(db.call_backs.request_call_back); {call_time} is filled only from a written task, "
    "and flows.engage_local says callback_failed without one")
WAITLIST = Guarantee(
    "db.waitlist_offers.offer_freed_slot",
    "the caller stays on the waitlist: a cancellation queues the offer job "
    "(db.waitlist.slot_freed), which writes a waitlist_offer task for the first patients "
    "waiting who may be called", says_when=False)
FALLBACK = Guarantee(
    "processors.call_control.fallback_responder_processor.FallbackResponderProcessor."
    "_call_back",
    "the no-LLM responder's yes writes the callback task (CallBacks.request), then says "
    "the line with its $call_time")
TIME_LIMIT = Guarantee(
    "processors.conversation.conversation_director_processor.ConversationDirectorProcessor."
    "_arrange_call_back",
    "the time limit's yes writes the callback task (CallBacks.request), then says the "
    "line with its {call_time}")

PROMISES = {
    "actions.yaml:actions.red_flag_emergency_redirect": ESCALATE,
    "actions.yaml:actions.human_callback_requested": ESCALATE,
    "actions.yaml:actions.sales_callback_requested": ESCALATE,
    "actions.yaml:actions.keep_on_waitlist": WAITLIST,
    "actions.yaml:actions.waitlist_slot_already_gone": WAITLIST,
    "actions.yaml:outcomes.slot_gone": WAITLIST,
    "director/lines.yaml:time_limit.callback_confirmed": TIME_LIMIT,
    "fallback/callback_confirmed.txt": FALLBACK,
}

NO_PROMISE = {
    "actions.yaml:actions.ask_callback_contact_details": "asks which number to use",
    "actions.yaml:rephrased.ask_callback_message": "asks what to pass on",
    "actions.yaml:rephrased.ask_callback_contact_details": "asks which number to use",
    "actions.yaml:actions.offer_help_when_stuck": "offers a call back (a question)",
    "handoff/not_reached.txt": "offers a call back after a person could not be reached, "
                               "asking what to pass on (the callback flow writes the task)",
    "actions.yaml:lookups.not_found": "offers a call back (a question)",
    "actions.yaml:outcomes.no_slots": "offers a call back (a question)",
    "actions.yaml:outcomes.system_down": "offers a call back (a question)",
    "actions.yaml:outcomes.slot_taken_none": "offers a call back (a question)",
    "actions.yaml:actions.ask_for_requester": "the call back being made now",
    "actions.yaml:actions.say_why_calling_back": "the call back being made now",
    "actions.yaml:actions.opted_out_goodbye": "no call again",
    "actions.yaml:outcomes.callback_failed": "no call arranged",
    "calendar.yaml:after_hours.clinic": "offers to take a message",
    "calendar.yaml:after_hours.location": "offers to take a message",
    "calendar.yaml:after_hours.clinic_unknown": "offers to take a message",
    "calendar.yaml:after_hours.location_unknown": "offers to take a message",
    "director/lines.yaml:time_limit.offer_callback": "offers a call back (a question)",
    "director/lines.yaml:time_limit.callback_failed": "no call arranged",
    "fallback/offer_callback.txt": "offers a call back (a question)",
    "fallback/ask_again.txt": "offers a call back (a question)",
    "fallback/callback_failed.txt": "no call arranged",
    "voice/hearing_trouble.txt": "offers a call back if the line stays bad",
    "safety/soft_guidance.txt": "guidance for the model, never spoken",
    "safety/soft_crisis_guidance.txt": "guidance for the model, never spoken",
}


def _strings(prefix: str, value: object) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _strings(f"{prefix}.{key}" if prefix else str(key), inner)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _strings(f"{prefix}[{index}]", inner)
    elif isinstance(value, str):
        yield prefix, value


def spoken_lines(root: Path = PROMPTS_DIR) -> dict[str, str]:
    """Every line in the prompt files that are said (`.txt`, `.yaml`; the `.md` files
    instruct models), keyed `file:key.path` (or the file alone)."""
    lines = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.suffix == ".txt":
            lines[name] = path.read_text(encoding="utf-8").strip()
        elif path.suffix == ".yaml":
            for key, text in _strings("", yaml.safe_load(path.read_text(encoding="utf-8"))):
                lines[f"{name}:{key}"] = text
    return lines


def test_every_line_that_speaks_of_a_call_from_the_clinic_is_accounted_for():
    speaking = {name for name, text in spoken_lines().items()
                if CALL_FROM_THE_CLINIC.search(text)}

    unlisted = sorted(speaking - PROMISES.keys() - NO_PROMISE.keys())
    gone = sorted((PROMISES.keys() | NO_PROMISE.keys()) - speaking)
    assert unlisted == [], "list each as a promise (with the code writing its task) or not"
    assert gone == [], "these lines no longer speak of a call: take them off the lists"
    assert not PROMISES.keys() & NO_PROMISE.keys()


@pytest.mark.parametrize("name", sorted(PROMISES))
def test_each_promise_names_the_code_that_writes_its_task(name):
    parts = PROMISES[name].code.split(".")
    cut = max(i for i in range(1, len(parts)) if _importable(".".join(parts[:i])))
    found: object = importlib.import_module(".".join(parts[:cut]))
    for attribute in parts[cut:]:
        found = getattr(found, attribute)
    assert callable(found)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(n for n, g in PROMISES.items() if g.says_when))
def test_a_promised_call_back_says_when_it_will_come(name):
    line = spoken_lines()[name]
    assert "{call_time}" in line or "$call_time" in line, line


@pytest.mark.parametrize("name", sorted(n for n, g in PROMISES.items() if not g.says_when))
def test_a_waitlist_promise_is_only_for_when_a_time_opens(name):
    line = spoken_lines()[name]
    assert re.search(r"we'll call you (?:if|when) another time opens up", line), line
