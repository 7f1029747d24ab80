"""A finished call's summary by rules: what the caller wanted, what was done, what is left
for a person, and the concerns they raised, each with the turns it comes from.

What was done is read from what the call recorded (the world-model events it wrote, the
call backs it arranged, the transfers it made), never guessed from words: a booking is in
the summary because the booking was written. What the caller wanted comes from the
router's rules on their words; concerns from the red-flag rules, health words,
escalations, and signs of dissatisfaction (their words and how they sounded at the end).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from analysis.summary_rules import (
    EventRule,
    dissatisfied_pattern,
    health_pattern,
    summary_rules,
)
from analysis.turn_links import caller_turn_before, linked, turn_at
from db.call_analyses import CallRecord, RecordedHop
from flows.router import clauses, route_turn
from processors.safety.red_flags import default_red_flags

# Tasks a call can finish by writing something; a question is answered by talking.
WRITING_TASKS = frozenset({"book", "reschedule", "cancel", "confirm"})
APPOINTMENT_TASKS = WRITING_TASKS | {"query"}
# Below this valence (signed) the caller's voice or words were unpleasant.
UNHAPPY_VALENCE = -0.3
QUOTE_CHARS = 80


@dataclass(frozen=True)
class Item:
    """One line of a summary: for the clinic (`text`), for the caller later (`recap`)."""

    text: str
    turns: tuple[int, ...] = ()
    kind: str | None = None
    task: str | None = None
    recap: str | None = None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["turns"] = list(self.turns)
        return {key: value for key, value in data.items() if value is not None}


@dataclass(frozen=True)
class CallSummary:
    wanted: tuple[Item, ...] = ()
    done: tuple[Item, ...] = ()
    left_for_person: tuple[Item, ...] = ()
    concerns: tuple[Item, ...] = ()
    unresolved: tuple[Item, ...] = field(default=())  # wanted, neither done nor handed on

    def as_json(self) -> dict[str, Any]:
        return {name: [item.as_json() for item in getattr(self, name)]
                for name in ("wanted", "done", "left_for_person", "concerns", "unresolved")}

    def recaps(self) -> list[str]:
        """What the caller did on this call, in their terms: what was done, else what
        they wanted."""
        done = [item.recap for item in self.done if item.recap]
        return done or [item.recap for item in self.wanted if item.recap]


def what_they_wanted(record: CallRecord) -> tuple[Item, ...]:
    """Each distinct thing the caller asked for, in the order they first asked: from the
    router's reading of their words, and from the context graph's exits the call took
    (which also read what the router alone does not, like "a checkup tomorrow"). Where
    the graph took such exits, the appointment tasks are the graph's alone."""
    rules = summary_rules()
    # Where the context graph ran, its exits say which appointment task the caller had:
    # the router alone reads "my appointment" in a question as a wish to book.
    graph_read = any(hop.exit in rules.exits for hop in record.hops)
    asked: list[tuple[float, str]] = []
    for turn in record.caller_turns():
        for part in [turn.text, *clauses(turn.text)]:  # "I'd book, but I have chest pain"
            route = route_turn(part).route
            want = rules.wants.get(route)
            if want is not None and not (graph_read and want.task in APPOINTMENT_TASKS):
                asked.append((turn.seq, route))
    for hop in graph_wants(record):
        route = rules.exits[hop.exit or ""]
        turn = caller_turn_before(record, turn_at(record, hop.at_ms))
        # a call without timings: the turn is not known
        asked.append((float("inf") if turn is None else turn, route))
    found: dict[str, Item] = {}
    for seq, route in sorted(asked):
        want = rules.wants[route]
        if want.text not in found:
            found[want.text] = Item(want.text, linked(None if seq == float("inf") else int(seq)),
                                    task=want.task, recap=want.recap)
    return tuple(found.values())


def graph_wants(record: CallRecord) -> list[RecordedHop]:
    """The context graph's exits that name what the caller wanted, without those a later
    exit took over before anything was written for them: the agent took the request for
    another (or the caller changed it), and what they wanted is the later one."""
    rules = summary_rules()
    hops = [hop for hop in record.hops if hop.exit in rules.exits]
    written = {rule.task for write in record.writes
               for rule in [rules.writes.get(write.type)] if rule is not None}

    def task(hop: RecordedHop) -> str:
        return rules.wants[rules.exits[hop.exit or ""]].task

    return [hop for i, hop in enumerate(hops)
            if task(hop) in written or task(hop) not in APPOINTMENT_TASKS
            or not any(task(later) != task(hop) and task(later) in APPOINTMENT_TASKS
                       for later in hops[i + 1:])]


def restated(record: CallRecord) -> list[RecordedHop]:
    """Where the caller had to say again what they wanted: the graph went back to find out
    after taking a request it then left with nothing written for it."""
    rules = summary_rules()
    kept = graph_wants(record)
    dropped = [hop for hop in record.hops if hop.exit in rules.exits and hop not in kept]
    return [hop for hop in record.hops if hop.exit in rules.restated_exits
            and any(d.at_ms is not None and hop.at_ms is not None and d.at_ms <= hop.at_ms
                    for d in dropped)]


def _what(summary: str) -> str:
    """"Booked: Physiotherapy with Dr Okafor, Tuesday at 10 AM." → the part after the label."""
    _label, _colon, rest = summary.partition(": ")
    return (rest or summary).strip().rstrip(".")


def _ruled(record: CallRecord) -> list[tuple[EventRule, int | None]]:
    """The call's events and succeeded tools that the rules name, with when they happened."""
    rules = summary_rules()
    found = [(rules.events[e.type], e.at_ms) for e in record.events if e.type in rules.events]
    found += [(rules.tools[t.name], t.started_ms) for t in record.tools
              if t.succeeded and t.name in rules.tools]
    return found


def what_was_done(record: CallRecord) -> tuple[Item, ...]:
    rules = summary_rules()
    done: list[Item] = []
    for write in record.writes:
        rule = rules.writes.get(write.type)
        if rule is None:
            continue
        turn = caller_turn_before(record, write.turn_seq)
        done.append(Item(write.summary.strip(), linked(turn, write.turn_seq), kind=rule.kind,
                         task=rule.task, recap=rule.recap.format(what=_what(write.summary))))
    for rule, at_ms in _ruled(record):
        if rule.done is None or any(item.kind == rule.kind for item in done):
            continue  # one call back, one transfer, one text: said once
        done.append(Item(rule.done, linked(turn_at(record, at_ms)), kind=rule.kind,
                         task=rule.task, recap=rule.recap))
    for escalation in record.escalations:
        if escalation.get("severity") == "hard":
            done.append(Item(f"Escalated for safety ({escalation['concept']})",
                             linked(turn_at(record, escalation.get("at_ms"))), kind="escalated",
                             task="person"))
            break
    return tuple(done)


def left_for_a_person(record: CallRecord, wanted: tuple[Item, ...],
                      done: tuple[Item, ...]) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    """(what a person must do, what the caller wanted that nobody did or took on)."""
    left: list[Item] = []
    for rule, at_ms in _ruled(record):
        if rule.left is not None and rule.left not in {i.text for i in left}:
            left.append(Item(rule.left, linked(turn_at(record, at_ms))))
    if any(e.get("status") == "open" for e in record.escalations):
        at = next(e.get("at_ms") for e in record.escalations if e.get("status") == "open")
        left.append(Item("An escalation is still open", linked(turn_at(record, at))))
    handed_on = any(item.task == "person" for item in done)
    done_tasks = {item.task for item in done}
    unresolved: list[Item] = []
    for want in wanted:
        finished = (want.task in done_tasks if want.task in WRITING_TASKS
                    else want.task != "person" or handed_on)
        if finished or (handed_on and want.task in WRITING_TASKS):
            continue
        unresolved.append(want)
        if want.task == "person":
            left.append(Item("The caller asked for a person and was not put through",
                             want.turns))
        else:
            left.append(Item(f"Not done: {want.text.lower()}", want.turns))
    return tuple(left), tuple(unresolved)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def concerns_raised(record: CallRecord) -> tuple[Item, ...]:
    concerns: list[Item] = []
    red_flags = default_red_flags()
    health, unhappy = health_pattern(), dissatisfied_pattern()
    said = record.caller_turns()
    for turn in said:
        flag = red_flags.first(turn.text)
        if flag is not None:
            name = flag.flag.replace("_", " ")
            concerns.append(Item(f"Red flag ({name}): \"{_quote(turn.text)}\"",
                                 (turn.seq,), kind="health"))
        elif health.search(turn.text.lower()):
            concerns.append(Item(f"Health: \"{_quote(turn.text)}\"", (turn.seq,), kind="health"))
        if unhappy.search(turn.text.lower().replace("’", "'")):
            concerns.append(Item(f"Unhappy: \"{_quote(turn.text)}\"", (turn.seq,),
                                 kind="dissatisfaction"))
    for escalation in record.escalations:
        concerns.append(Item(
            f"Safety: {escalation['concept']} ({escalation['severity']})",
            linked(turn_at(record, escalation.get("at_ms"))), kind="safety"))
    ending = [t for t in said[-2:] if t.valence is not None]
    if ending and all(t.valence < UNHAPPY_VALENCE for t in ending) and not any(
            c.kind == "dissatisfaction" for c in concerns):
        concerns.append(Item("The caller sounded unhappy at the end of the call",
                             tuple(t.seq for t in ending), kind="dissatisfaction"))
    return tuple(concerns)


def summarise(record: CallRecord) -> CallSummary:
    wanted = what_they_wanted(record)
    done = what_was_done(record)
    left, unresolved = left_for_a_person(record, wanted, done)
    return CallSummary(wanted, done, left, concerns_raised(record), unresolved)
