"""The rule-based persona caller: answers what the agent just asked from the persona's
facts, in the persona's way of talking.

`RuleCaller.respond` takes what the agent said since the caller last spoke and returns
the caller's next line, or None to hang up. It reads the agent's turn with
`questions.classify`, keeps track of where the caller is in their tasks, and says it
with the persona's phrase bank (seeded: a run repeats). It never looks at the server:
like a person on the phone, it only knows what it heard and what it wants. An outbound
persona answers the clinic's call instead of opening one: `callee.CalleeRules` reads
each turn first (who the clinic asks for, what it calls about).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from simulator.personas.callee import PASS, CalleeRules
from simulator.personas.model import DobStyle, Persona, Task
from simulator.personas.phrase_bank import PhraseBank, Style
from simulator.personas.questions import AgentAsk, Offer, answers, classify
from simulator.personas.spoken import say_date_of_birth, say_phone, spell

BOOKING_TASKS = ("book", "reschedule", "move_reminder")
CANCEL_TASKS = ("cancel", "cancel_reminder")
HAND_OVER_TASKS = ("callback", "person")
# How many times in a row the caller says "sorry?" or repeats themselves before giving up.
STUCK_LIMIT = 3
# Hearing the agent say the very same thing this many times in a row, the caller gives up.
SAME_TURN_LIMIT = 3
HOLD_LINES = 2  # lines a caller waits on hold for a person before hanging up
_CASUAL_DOB_STYLES: tuple[DobStyle, ...] = ("long", "ordinal_of", "slashes",
                                             "month_words_short_year")


@dataclass
class CallerProgress:
    """Where the caller is: lines said, which task, what they already did."""

    lines: int = 0
    task_index: int = 0
    done: list[bool] = field(default_factory=list)
    asked: Counter[str] = field(default_factory=Counter)
    given_wrong: set[str] = field(default_factory=set)
    to_correct: str | None = None
    side_questions: list[str] = field(default_factory=list)
    changed_mind: bool = False
    rejected_day: bool = False
    asked_other_time: bool = False
    chosen: Offer | None = None
    rejected_far: bool = False
    held: int = 0
    stuck: int = 0
    last_heard: str = ""
    same_heard: int = 0
    finished: bool = False


class RuleCaller:
    """A persona played by rules; `respond` is called once per caller line."""

    def __init__(self, persona: Persona, rng: random.Random | None = None, *,
                 today: Callable[[], date] = date.today) -> None:
        self.persona = persona
        self.rng = rng or random.Random(persona.random_seed)
        self._today = today
        style: Style = ("terse" if persona.has("terse")
                        else "rambling" if persona.has("rambling") else "plain")
        self.phrases = PhraseBank(self.rng, style)
        self.progress = CallerProgress(done=[False] * len(persona.tasks),
                                       side_questions=list(persona.side_questions))
        facts = persona.caller
        self.dob_style: DobStyle = facts.dob_style or (
            "bare_numbers" if persona.has("dob_as_numbers")
            else self.rng.choice(_CASUAL_DOB_STYLES))
        self._replies: dict[str, Callable[[AgentAsk], str | None]] = {
            "crisis_hold": self._on_hold, "emergency_advice": self._on_emergency_advice,
            "goodbye": self._on_goodbye, "keep_move_cancel": self._keep_move_cancel,
            "confirm_cancel": self._confirm_cancel, "confirm_booking": self._confirm_booking,
            "confirm_details": self._confirm_details, "which_booking": self._which_booking,
            "choose_slot": self._choose_slot, "spell_name": self._spell_name,
            "first_name": self._first_name, "last_name": self._last_name,
            "full_name": self._full_name, "date_of_birth": self._date_of_birth,
            "callback_number": self._callback_number, "phone_number": self._phone_number,
            "message": self._message, "transfer_offer": self._transfer_offer,
            "callback_offer": self._callback_offer, "location": self._location,
            "service": self._service, "reason": self._reason,
            "time_preference": self._time_preference, "carry_on": self._carry_on,
            "returned_call": self._returned_call, "anything_else": self._anything_else,
            "how_can_help": self._how_can_help, "other": self._other,
        }
        self.callee = CalleeRules(self) if persona.outbound else None

    # -- the turn ----------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """The caller has said their last line (a goodbye): they only wait to hang up."""
        return self.progress.finished

    @property
    def task(self) -> Task:
        return self.persona.tasks[min(self.progress.task_index, len(self.persona.tasks) - 1)]

    def respond(self, heard: list[str], *, interrupting: bool = False) -> str | None:
        """The caller's next line after hearing `heard` (the agent's words since the
        caller last spoke); None: the caller hangs up now."""
        progress = self.progress
        if progress.finished:
            return None
        limit = self.persona.hang_up_after
        if self.persona.has("hangs_up_early") and limit is not None and progress.lines >= limit:
            progress.finished = True
            return None
        progress.lines += 1
        ask = classify(" ".join(heard), outbound=self.persona.outbound)
        progress.asked[ask.kind] += 1
        # The greeting answers nothing the caller has yet to ask, and what it says about
        # emergencies (a clinic that is closed says whom to call) is general, not a redirect.
        # (The clinic's own call opens with a question for whoever answers.)
        greeting = progress.lines == 1 and not self.persona.outbound
        if not greeting:
            self._move_on_if_answered(ask)
        looping = self._heard_again(ask.text) and ask.kind != "crisis_hold"  # holding is no loop
        if progress.lines > self.persona.max_lines or looping:
            return self.finish(self.phrases.say("give_up_stuck"))
        slipped = progress.to_correct  # a slip on the line before, to put right on this one
        if greeting and ask.kind != "crisis_hold":
            line = self._opening(ask)
        else:
            line, kind = self._reply(ask)
            if kind != "other" and line is not None:
                progress.stuck = 0
        if line is None:
            progress.finished = True
            return None
        line = self._blurted(line)
        if slipped is not None and progress.to_correct == slipped:
            line = f"{self._correction_next_line()} {line}"
        return self.phrases.around(line, rambling=self.persona.has("rambling"),
                                   interrupting=interrupting)

    def _reply(self, ask: AgentAsk) -> tuple[str | None, str]:
        """The answer to `ask` (the callee's first, on the clinic's call), and the kind of
        question it answered."""
        if self.callee is not None:
            said = self.callee.reply(ask)
            if said is not PASS:
                return said, ask.kind  # type: ignore[return-value]  # str | None here
            ask = classify(ask.text)  # not about the clinic's call: as on any call
        return self._replies[ask.kind](ask), ask.kind

    def _heard_again(self, text: str) -> bool:
        """Whether the agent has now said the very same thing SAME_TURN_LIMIT times running."""
        progress = self.progress
        said = " ".join(text.lower().split())
        progress.same_heard = progress.same_heard + 1 if said and said == progress.last_heard else 1
        progress.last_heard = said
        return progress.same_heard >= SAME_TURN_LIMIT

    def _books(self) -> bool:
        """Whether the current task is (or comes with) a booking to make or move."""
        task = self.task
        return task.kind in BOOKING_TASKS or (task.kind in ("emergency", "crisis")
                                              and task.service is not None)

    def finish(self, line: str) -> str:
        self.progress.finished = True
        return line

    def _blurted(self, line: str) -> str:
        """Emergency or crisis words come out on their line, whatever was asked."""
        for task in self.persona.tasks:
            if task.kind in ("emergency", "crisis") and task.say_at == self.progress.lines > 1:
                return task.words or line
        return line

    # -- what the caller says ---------------------------------------------------------

    def values(self, task: Task | None = None) -> dict[str, str]:
        task = task or self.task
        facts = self.persona.caller
        return {
            "first": facts.first_name, "last": facts.last_name, "full": facts.full_name,
            "dob": say_date_of_birth(facts.date_of_birth, self.dob_style),
            "service": task.service or "an appointment", "reason": task.reason or (
                task.service or "a check-up"),
            "when": task.when or "as soon as possible",
            "appointment": task.appointment or "my appointment",
            "message": task.message or task.reason or "my appointment",
            "words": task.words or "", "phone": say_phone(self.persona.own_phone),
            "spelled": spell(facts.last_name),
        }

    def _clause(self, task: Task) -> str:
        key = "clause_book_when" if task.kind == "book" and task.when else f"clause_{task.kind}"
        if not self.phrases.has(key):
            key = "clause_book"
        return self.phrases.say(key, sentence=False, **self.values(task))

    def clauses(self, tasks: list[Task]) -> str:
        said = [self._clause(task) for task in tasks]
        if len(said) == 1:
            return said[0]
        instead = tasks[0].kind == "cancel" and tasks[1].kind == "book"
        return ", and then ".join([", ".join(said[:-1]), said[-1]]) + (
            " instead" if instead else "")

    def _opening(self, ask: AgentAsk) -> str:
        """The first line: what they are calling for, the way this caller puts it."""
        tasks = self.persona.tasks
        first = tasks[0]
        prefix = self.phrases.say("returned_call") + " " if ask.kind == "returned_call" else ""
        if self.persona.opening:
            return prefix + self.persona.opening
        if first.kind in ("emergency", "crisis") and first.say_at == 1:
            return prefix + self.phrases.say(f"opening_{first.kind}", **self.values(first))
        if first.kind in ("emergency", "crisis"):  # the words come later
            return prefix + (self.phrases.say("opening_book", **self.values(first))
                             if first.service else self.phrases.say("generic_booking"))
        if self.persona.has("front_loads") and first.kind == "book":
            values = self.values(first)
            values["last"] = self._given("last_name", values["last"])
            values["full"] = f"{values['first']} {values['last']}"
            values["dob"] = self._given("date_of_birth", values["dob"])
            return prefix + self.phrases.say("opening_front_loaded", **values)
        if len(tasks) > 1:
            return prefix + self.phrases.say("opening_tasks", clauses=self.clauses(tasks))
        return prefix + self.phrases.say(f"opening_{first.kind}", **self.values(first))

    def remaining_tasks(self) -> list[Task]:
        """The tasks not done yet, in order."""
        return [t for t, done in zip(self.persona.tasks, self.progress.done, strict=True)
                if not done]

    def _restate(self) -> str:
        return self.phrases.say("restate",
                                clauses=self.clauses(self.remaining_tasks() or [self.task]))

    # -- corrections ------------------------------------------------------------------

    def _wrong_value(self, name: str) -> str | None:
        """What this caller says by mistake for `name` the first time, if they do."""
        corrections = self.persona.corrections
        if (not self.persona.has("corrects_self") or corrections is None
                or name in self.progress.given_wrong):
            return None
        wrong = getattr(corrections, name)
        if wrong is None:
            return None
        if name == "date_of_birth":
            return say_date_of_birth(wrong, self.dob_style)
        return wrong.capitalize() if name == "day" else wrong

    def _given(self, name: str, right: str) -> str:
        """`right`, or the slip this caller makes first, corrected on this line or the next."""
        wrong = self._wrong_value(name)
        if wrong is None:
            return right
        self.progress.given_wrong.add(name)
        if self.rng.random() < 0.5:
            return self.phrases.say("correction_same_line", sentence=False, wrong=wrong,
                                    right=self._corrected(name, right))
        self.progress.to_correct = name
        return wrong

    def _corrected(self, name: str, right: str) -> str:
        return f"{right}, {spell(right)}" if name == "last_name" else right

    def _correction_next_line(self) -> str:
        name, self.progress.to_correct = self.progress.to_correct, None
        right = self._right_value(name or "")
        return self.phrases.say("correction_next_line", right=self._corrected(name or "", right))

    def _right_value(self, name: str) -> str:
        facts = self.persona.caller
        if name == "day":
            return (self.task.prefer.day or "").capitalize()
        if name == "date_of_birth":
            return say_date_of_birth(facts.date_of_birth, self.dob_style)
        return getattr(facts, name)

    # -- answers, by what the agent asked ------------------------------------------------

    def _on_hold(self, ask: AgentAsk) -> str | None:
        self.progress.held += 1
        if self.progress.held > HOLD_LINES:
            return None
        self._mark_done("crisis")
        return self.phrases.say("crisis_waiting")

    def _on_emergency_advice(self, ask: AgentAsk) -> str | None:
        self._mark_done("emergency")
        return self.finish(self.phrases.say("emergency_ack"))

    def _on_goodbye(self, ask: AgentAsk) -> str | None:
        self._mark_answered(ask)
        return self.finish(self.phrases.say("goodbye"))

    def _keep_move_cancel(self, ask: AgentAsk) -> str | None:
        kind = self.task.kind
        key = "move_it" if kind in ("reschedule", "move_reminder") else "cancel_it" if kind in (
            "cancel", "cancel_all", "cancel_reminder") else "keep_it"
        return self.phrases.say(key)

    def _confirm_cancel(self, ask: AgentAsk) -> str | None:
        task = self.task
        if task.kind == "cancel_all":
            self._mark_current_done()
            return self.phrases.say("yes_cancel_all")
        if task.kind not in CANCEL_TASKS:
            return self._refuse()
        if task.appointment and not _mentions(ask.text, task.appointment):
            return f"No. {self.phrases.say('which_booking', **self.values())}"
        self._mark_current_done()
        return self.phrases.say("yes_cancel")

    def _confirm_booking(self, ask: AgentAsk) -> str | None:
        task, progress = self.task, self.progress
        if not self._books():
            return self._refuse()
        if self.persona.has("changes_mind") and not progress.changed_mind:
            progress.changed_mind = True
            if self.persona.changes_mind == "gives_up":
                return self.finish(self.phrases.say("gives_up"))
            return self.phrases.say("not_that_one")
        wanted, avoided = task.prefer.day, task.prefer.not_day
        heard_days = {offer.weekday for offer in ask.offers}
        if wanted and heard_days and wanted not in heard_days and not progress.rejected_day:
            progress.rejected_day = True
            return self.phrases.say("wrong_day", day=wanted.capitalize())
        if avoided and avoided in heard_days and not progress.rejected_day:
            progress.rejected_day = True
            return self.phrases.say("cannot_do_day", day=avoided.capitalize())
        if ask.offers and not self._soon_enough(ask.offers[0]) and not progress.rejected_far:
            progress.rejected_far = True
            return self.phrases.say("too_far")
        self._mark_current_done()
        return self.phrases.say("yes_book")

    def _soon_enough(self, offer: Offer) -> bool:
        """A caller who wants it soon turns down a date further out than they said."""
        within = self.task.prefer.within_days
        day = offer.on_or_after(self._today())
        return within is None or day is None or (day - self._today()).days <= within

    def _refuse(self) -> str:
        """A read-back of something the caller never asked for: no, and what they want."""
        return f"No. {self._restate()}"

    def _confirm_details(self, ask: AgentAsk) -> str | None:
        facts = self.persona.caller
        corrections = self.persona.corrections
        for name in ("first_name", "last_name"):
            slip = getattr(corrections, name) if corrections is not None else None
            if slip and _mentions(ask.text, slip) and not _mentions(ask.text, getattr(facts, name)):
                self.progress.to_correct = None
                right = getattr(facts, name)
                return self.phrases.say("correction_no_to_readback",
                                        right=self._corrected(name, right))
        named = _mentions(ask.text, facts.last_name) or _mentions(ask.text, facts.first_name)
        if not named and self.progress.to_correct is not None:
            return self._correction_next_line()
        return self.phrases.say("agree")

    def _which_booking(self, ask: AgentAsk) -> str | None:
        task = self.task
        if task.kind == "cancel_all":
            return self.phrases.say("yes_cancel_all")
        if task.kind not in (*CANCEL_TASKS, "reschedule", "move_reminder"):
            return self._restate()
        return self.phrases.say("which_booking", **self.values())

    def _choose_slot(self, ask: AgentAsk) -> str | None:
        task, progress = self.task, self.progress
        if not self._books():
            return self._restate()
        if progress.side_questions:
            return self.phrases.say(f"side_{progress.side_questions.pop(0)}")
        offers = ask.offers
        if not offers:
            return self.phrases.say("choose", choice="the first one")
        wanted_day, wanted_part = task.prefer.day, task.prefer.part_of_day
        candidates = list(range(len(offers)))
        if progress.changed_mind and progress.chosen is not None and len(offers) > 1:
            candidates = [i for i in candidates if offers[i] != progress.chosen] or candidates
        matching = [i for i in candidates
                    if (wanted_day is None or offers[i].weekday == wanted_day)
                    and offers[i].weekday != task.prefer.not_day
                    and (wanted_part is None or offers[i].part_of_day == wanted_part)
                    and self._soon_enough(offers[i])]
        if wanted_day and not matching and not progress.asked_other_time:
            progress.asked_other_time = True
            return self.phrases.say("other_time", day=wanted_day.capitalize())
        if not any(self._soon_enough(offers[i]) for i in candidates) and not progress.rejected_far:
            progress.rejected_far = True
            return self.phrases.say("too_far")
        if not matching:  # nothing they wanted: they settle for what is there
            progress.rejected_day = progress.rejected_far = True
        index = (matching or candidates)[0]
        progress.chosen = offers[index]
        return self.phrases.say("choose", choice=self._choice_words(offers, index))

    def _choice_words(self, offers: list[Offer], index: int) -> str:
        """How this caller names the time they pick: by place, by day or by the hour."""
        ways = [("the first one", "the second one", "the third one")[index]
                if index < 3 else "that one"]
        weekdays = [offer.weekday for offer in offers]
        if weekdays.count(offers[index].weekday) == 1:
            ways.append(f"the {offers[index].weekday.capitalize()} one")
        return self.rng.choice(ways)

    def _spell_name(self, ask: AgentAsk) -> str | None:
        return self.phrases.say("spelling", **self.values())

    def _first_name(self, ask: AgentAsk) -> str | None:
        first = self._given("first_name", self.persona.caller.first_name)
        line = self.phrases.say("first_name", first=first)
        return self._volunteer(line, "last_name")

    def _last_name(self, ask: AgentAsk) -> str | None:
        values = self.values()
        values["last"] = self._given("last_name", values["last"])
        key = "last_name_spelled" if self.persona.has("spells_name") else "last_name"
        if values["last"] != self.persona.caller.last_name:
            key = "last_name"  # a slip is not spelled out
        return self._volunteer(self.phrases.say(key, **values), "date_of_birth")

    def _full_name(self, ask: AgentAsk) -> str | None:
        values = self.values()
        values["last"] = self._given("last_name", values["last"])
        values["full"] = f"{values['first']} {values['last']}"
        own = values["last"] == self.persona.caller.last_name  # a slip is not spelled out
        spelled = self.persona.has("spells_name") and own
        line = self.phrases.say("full_name_spelled" if spelled else "full_name", **values)
        return self._volunteer(line, "date_of_birth")

    def _date_of_birth(self, ask: AgentAsk) -> str | None:
        facts = self.persona.caller
        if self.progress.asked["date_of_birth"] > 1:  # asked again: the clearest way
            return self.phrases.say("date_of_birth_again",
                                    dob=say_date_of_birth(facts.date_of_birth, "long"))
        dob = self._given("date_of_birth", say_date_of_birth(facts.date_of_birth, self.dob_style))
        return self._volunteer(self.phrases.say("date_of_birth", dob=dob), "when")

    def _volunteer(self, line: str, detail: str) -> str:
        """An over-answering caller adds the next thing they expect to be asked."""
        if not self.persona.has("over_answers") or self.rng.random() < 0.3:
            return line
        values = self.values()
        if detail == "last_name":
            return f"{line} {self.phrases.say('full_name', **values)}"
        if detail == "date_of_birth":
            return f"{line} {self.phrases.say('date_of_birth', **values)}"
        if detail == "when" and self.task.kind == "book":
            return f"{line} {self.phrases.say('when', **values)}"
        return line

    def _callback_number(self, ask: AgentAsk) -> str | None:
        if self.persona.caller.phone and self.persona.caller.phone != self.persona.from_number:
            return self.phrases.say("callback_number_no", **self.values())
        return self.phrases.say("callback_number_yes")

    def _phone_number(self, ask: AgentAsk) -> str | None:
        return self.phrases.say("phone", **self.values())

    def _message(self, ask: AgentAsk) -> str | None:
        if self.task.kind in HAND_OVER_TASKS or self.task.message:
            return self.phrases.say("message", **self.values())
        return self._restate()

    def _transfer_offer(self, ask: AgentAsk) -> str | None:
        return self.phrases.say("transfer_yes")

    def _callback_offer(self, ask: AgentAsk) -> str | None:
        return self.phrases.say("callback_yes")

    def _location(self, ask: AgentAsk) -> str | None:
        return self.phrases.say("location_any")

    def _service(self, ask: AgentAsk) -> str | None:
        if not self._books() and self.task.kind != "price":
            return self._restate()
        return self.phrases.say("service", **self.values())

    def _reason(self, ask: AgentAsk) -> str | None:
        if ask.question and "how long" in ask.question.lower():
            return self.phrases.say("duration")
        return self.phrases.say("reason", **self.values())

    def _time_preference(self, ask: AgentAsk) -> str | None:
        task = self.task
        if not self._books():
            return self._restate()
        again = self.progress.asked["time_preference"] > 1
        wanted = task.prefer.day
        if again and self.persona.has("vague"):
            if wanted:
                return self.phrases.say("when_day", day=wanted.capitalize())
            return self.phrases.say("when_again")
        slip = self._wrong_value("day")
        if slip is not None and wanted:
            self.progress.given_wrong.add("day")
            return self.phrases.say("correction_same_line", wrong=slip,
                                    right=wanted.capitalize()) + "."
        if task.when:
            return self.phrases.say("when", **self.values())
        if wanted:
            return self.phrases.say("when_day", day=wanted.capitalize())
        return self.phrases.say("when_any")

    def _carry_on(self, ask: AgentAsk) -> str | None:
        self._mark_answered(ask)
        if not self._books():
            return self._next_or_done()
        if self.progress.side_questions:
            return self.phrases.say(f"side_{self.progress.side_questions.pop(0)}")
        return self.phrases.say("carry_on")

    def _returned_call(self, ask: AgentAsk) -> str | None:
        return f"{self.phrases.say('returned_call')} {self._restate()}"

    def _anything_else(self, ask: AgentAsk) -> str | None:
        self._mark_answered(ask)
        if not self.progress.done[self.progress.task_index] and (
                self._books() or self.task.kind in (*CANCEL_TASKS, "cancel_all")):
            return self._restate()
        return self._next_or_done()

    def _how_can_help(self, ask: AgentAsk) -> str | None:
        self._mark_answered(ask)
        if self.progress.done[self.progress.task_index]:
            return self._next_or_done()
        return self._restate()

    def _other(self, ask: AgentAsk) -> str | None:
        progress = self.progress
        if self._mark_answered(ask) and ask.question is None:
            return self._next_or_done()
        progress.stuck += 1
        if progress.stuck >= STUCK_LIMIT:
            return self.finish(self.phrases.say("give_up_stuck"))
        return self.phrases.say("pardon") if progress.stuck == 1 else self._restate()

    # -- tasks ------------------------------------------------------------------------

    def _mark_current_done(self) -> None:
        self.progress.done[self.progress.task_index] = True

    def _mark_done(self, kind: str) -> None:
        for index, task in enumerate(self.persona.tasks):
            if task.kind == kind:
                self.progress.done[index] = True

    def _mark_answered(self, ask: AgentAsk) -> bool:
        """An information or hand-over task is done once the agent's words answer it."""
        if answers(self.task.kind, ask.text):
            self._mark_current_done()
            return True
        return False

    def _move_on_if_answered(self, ask: AgentAsk) -> None:
        """An information task the agent just answered is done; when the agent already
        asks about the next task, the caller is on that one."""
        progress = self.progress
        done = progress.done[progress.task_index] or self._mark_answered(ask)
        if not done or progress.task_index + 1 >= len(self.persona.tasks):
            return
        # a task already done (a write the caller said yes to) and the agent asking about
        # something: it is the next task, taken up without being asked again
        if ask.kind not in ("anything_else", "how_can_help", "carry_on", "goodbye", "other"):
            progress.task_index += 1

    def _next_or_done(self) -> str:
        progress = self.progress
        if progress.done[progress.task_index] and progress.task_index + 1 < len(self.persona.tasks):
            progress.task_index += 1
            return self.phrases.say("next_task", clauses=self._clause(self.task))
        if not progress.done[progress.task_index]:
            return self._restate()
        return self.finish(self.phrases.say("done"))


def _mentions(text: str, words: str) -> bool:
    """Whether the agent's words name this (an appointment 'my blood test' is named by
    'blood test'; a name by itself, in any case)."""
    spoken = text.lower()
    cleaned = words.lower().removeprefix("my ").removeprefix("the ").strip()
    return bool(cleaned) and cleaned in spoken
