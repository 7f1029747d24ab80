"""A persona file: who calls, what they want, how they talk, and what the call must achieve.

Personas are YAML validated by these models at the file boundary; `load_persona`
names every bad key in one line. A persona states facts (name, date of birth, phone),
one or more tasks in the order the caller wants them done, habits of speech, and the
outcome the call record must show.

An `outbound` persona answers a call the clinic places: `to` is their own number (the
one the clinic dials), `from` the clinic's, and their first task is their goal as the
callee (`OUTBOUND_GOALS`): what they do with the clinic's call. Tasks after it are
things they then ask for, as any caller would.
"""

from __future__ import annotations

import zlib
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simulator.simulator import E164, load_yaml_model, quoted_phone_number

DEMO_CLINIC_NUMBER = "+15550100100"

TaskKind = Literal[
    "book", "reschedule", "cancel", "cancel_all", "upcoming", "price", "hours", "emergency",
    "crisis", "callback", "person",
    # a callee's goal on a call the clinic places (the first task of an outbound persona)
    "take_callback",     # confirms who they are, hears why the clinic called back, goes on
    "accept_offer",      # says yes to the waitlisted slot the clinic offers
    "decline_offer",     # says no to it (they stay on the waitlist)
    "confirm_reminder",  # says they will come to the appointment they are reminded of
    "cancel_reminder",   # cannot come: cancels it
    "move_reminder",     # cannot come then: moves it (`when`, `prefer`)
    "opt_out",           # asks not to be called again (`words`, `say_at`)
    "wrong_person",      # is not the person the clinic asks for (`words`)
    "checkin",           # chats through a check-in call
]
Direction = Literal["inbound", "outbound"]
Habit = Literal[
    "front_loads",     # says name, date of birth, what and when in the first sentence
    "corrects_self",   # says a wrong value first (see `corrections`), then puts it right
    "vague",           # vague time preferences; more specific only when asked again
    "interrupts",      # starts talking while the agent is still on its turn
    "changes_mind",    # says no at the first read-back (see `changes_mind`)
    "spells_name",     # spells the last name as it gives it
    "dob_as_numbers",  # the date of birth as bare numbers: month, day, two-digit year
    "rambling",        # elderly, chatty phrasing around every answer
    "terse",           # as few words as will do
    "over_answers",    # answers the question and volunteers the next detail too
    "hangs_up_early",  # hangs up after `hang_up_after` lines, task or not
]
Outcome = Literal[
    "booked", "rescheduled", "cancelled", "cancelled_all", "told_upcoming", "answered",
    "emergency_redirect", "crisis_escalation", "callback_logged", "nothing_written",
    # what a call the clinic places ends with (see GOAL_OUTCOMES)
    "callback_returned", "confirmed", "offer_declined", "slot_gone", "opted_out",
    "wrong_person", "checked_in",
]
# What each callee goal may end with (an offer accepted is booked, unless another
# waitlisted patient said yes first).
GOAL_OUTCOMES: dict[str, tuple[str, ...]] = {
    "take_callback": ("callback_returned",), "accept_offer": ("booked", "slot_gone"),
    "decline_offer": ("offer_declined",), "confirm_reminder": ("confirmed",),
    "cancel_reminder": ("cancelled",), "move_reminder": ("rescheduled",),
    "opt_out": ("opted_out",), "wrong_person": ("wrong_person",), "checkin": ("checked_in",),
}
OUTBOUND_GOALS: tuple[str, ...] = tuple(GOAL_OUTCOMES)
# Goals that end the call: nothing comes after them.
LAST_GOALS = ("opt_out", "wrong_person")
DobStyle = Literal["long", "ordinal_of", "slashes", "bare_numbers", "month_words_short_year"]
PartOfDay = Literal["morning", "afternoon", "evening"]
Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
SideQuestion = Literal["price", "hours"]


class PersonaError(ValueError):
    """The persona file is missing, not YAML, or does not follow the persona model."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CallerFacts(_Strict):
    """Who is calling (outbound: who answers). `new`: the clinic has never seen them (they
    must be registered under exactly this name and date of birth; outbound: the clinic
    calls back a number with no record)."""

    first_name: str = Field(min_length=1, max_length=40)
    last_name: str = Field(min_length=1, max_length=40)
    date_of_birth: date
    new: bool = False
    phone: str | None = Field(
        default=None, pattern=E164,
        description="Their own number when it is not the one they call from.",
    )
    dob_style: DobStyle | None = Field(
        default=None, description="How they say their date of birth (default: varies)."
    )

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


class Preference(_Strict):
    """What the caller wants from a time, to choose among offered slots and to check a
    read-back. Empty: any time will do."""

    day: Weekday | None = None
    not_day: Weekday | None = Field(default=None, description="A day they cannot do.")
    part_of_day: PartOfDay | None = None
    within_days: int | None = Field(
        default=None, ge=0, le=90,
        description="They want it soon: a read-back further out than this is a no.",
    )


class Task(_Strict):
    """One thing the caller wants done, in their own words."""

    kind: TaskKind
    service: str | None = Field(
        default=None, description="What they call the appointment they want: 'a flu jab'."
    )
    type: str | None = Field(
        default=None,
        description="The clinic's name for the appointment type the task is about ('Flu "
        "shot'): a booking, move or cancellation must be of this type.",
    )
    reason: str | None = Field(default=None, description="Why they need it, if asked.")
    appointment: str | None = Field(
        default=None, description="Which of their bookings they mean: 'my blood test'."
    )
    when: str | None = Field(
        default=None, description="How they say when they'd like it: 'end of the week'."
    )
    prefer: Preference = Field(default_factory=Preference)
    message: str | None = Field(default=None, description="What to pass on (callback, person).")
    words: str | None = Field(
        default=None,
        description="Their own words: about the emergency or how they feel (emergency, "
        "crisis, checkin), asking not to be called (opt_out), saying the clinic has the wrong "
        "person (wrong_person). Default: said from the phrase bank.",
    )
    say_at: int = Field(
        default=1, ge=1, le=10,
        description="Emergency, crisis or opt-out words come in this caller line (1: the "
        "opening, or on a call the clinic places, the first answer).",
    )

    @model_validator(mode="after")
    def _needs_its_details(self) -> Task:
        needed = {
            "book": "service", "price": "service", "emergency": "words", "crisis": "words",
            "callback": "message", "reschedule": "appointment", "cancel": "appointment",
        }
        field = needed.get(self.kind)
        if field is not None and not getattr(self, field):
            raise ValueError(f"a {self.kind} task needs `{field}`")
        return self


class Corrections(_Strict):
    """What a caller who corrects themselves says first, before putting it right."""

    first_name: str | None = None
    last_name: str | None = None
    date_of_birth: date | None = None
    day: Weekday | None = None


class PersonaExpectation(_Strict):
    """What the call record must show. `outcome`: one per task, in order (a single value
    for a one-task call)."""

    outcome: list[Outcome] = Field(min_length=1)
    completion_reason: list[str] | None = Field(
        default=None, description="Acceptable completion reasons (default: by outcome)."
    )
    private: list[str] = Field(
        default_factory=list,
        description="On a call the clinic places: words about the patient's care (their "
        "surname, why the clinic calls) the agent must not say before the person is "
        "confirmed, nor at all to a wrong person; the judge adds its own general list.",
    )

    @field_validator("outcome", "completion_reason", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class Persona(_Strict):
    """A caller with a goal, facts and habits; see README "Personas"."""

    name: str = Field(min_length=1, pattern=r"^[a-z0-9_]+$")
    description: str = ""
    direction: Direction = Field(
        default="inbound",
        description="inbound: they call the clinic; outbound: they answer the clinic's call.",
    )
    from_number: str = Field(alias="from", pattern=E164)
    to_number: str = Field(default=DEMO_CLINIC_NUMBER, alias="to", pattern=E164)
    seed: int | None = Field(default=None, description="Default: derived from the name.")
    caller: CallerFacts
    opening: str | None = Field(
        default=None, description="Their first words, when what they say first is the point."
    )
    tasks: list[Task] = Field(min_length=1, max_length=4)
    habits: list[Habit] = Field(default_factory=list)
    corrections: Corrections | None = None
    side_questions: list[SideQuestion] = Field(
        default_factory=list, description="Asked when times are offered, before choosing."
    )
    changes_mind: Literal["other_slot", "gives_up"] = Field(
        default="other_slot", description="With the changes_mind habit: what they do instead."
    )
    hang_up_after: int | None = Field(default=None, ge=1, le=20)
    max_lines: int = Field(default=18, ge=2, le=40, description="Then they give up.")
    expect: PersonaExpectation

    @model_validator(mode="before")
    @classmethod
    def _clinic_calls_from_its_number(cls, data: object) -> object:
        """A call the clinic places comes from the clinic's number unless `from` says."""
        if (isinstance(data, dict) and data.get("direction") == "outbound"
                and "from" not in data and "from_number" not in data):
            return {**data, "from": DEMO_CLINIC_NUMBER}
        return data

    @field_validator("from_number", "to_number", mode="before")
    @classmethod
    def _quoted_number(cls, value: object) -> object:
        return quoted_phone_number(value)

    @model_validator(mode="after")
    def _consistent(self) -> Persona:
        if len(self.expect.outcome) != len(self.tasks):
            raise ValueError(
                f"expect.outcome names {len(self.expect.outcome)} outcome(s) for "
                f"{len(self.tasks)} task(s): give one per task"
            )
        if "corrects_self" in self.habits and self.corrections is None:
            raise ValueError("the corrects_self habit needs `corrections` (what they say first)")
        if "hangs_up_early" in self.habits and self.hang_up_after is None:
            raise ValueError("the hangs_up_early habit needs `hang_up_after` (caller lines)")
        if "terse" in self.habits and "rambling" in self.habits:
            raise ValueError("a caller cannot be both terse and rambling")
        self._consistent_direction()
        return self

    def _consistent_direction(self) -> None:
        goals = [task.kind for task in self.tasks if task.kind in OUTBOUND_GOALS]
        if self.direction == "inbound":
            if goals:
                raise ValueError(f"{goals[0]} is a goal on a call the clinic places: "
                                 "give the persona `direction: outbound`")
            return
        if self.tasks[0].kind not in OUTBOUND_GOALS:
            raise ValueError(f"an outbound persona's first task is their goal as the callee, "
                             f"one of {', '.join(OUTBOUND_GOALS)}")
        if len(goals) > 1:
            raise ValueError("an outbound persona has one goal (the first task); what they "
                             "ask for after it are ordinary tasks")
        goal = self.tasks[0].kind
        if goal in LAST_GOALS and len(self.tasks) > 1:
            raise ValueError(f"{goal} ends the call: nothing can come after it")
        if self.expect.outcome[0] not in GOAL_OUTCOMES[goal]:
            raise ValueError(f"a {goal} callee's outcome is "
                             f"{' or '.join(GOAL_OUTCOMES[goal])}, not {self.expect.outcome[0]}")
        if self.to_number == self.from_number:
            raise ValueError("an outbound persona's `to` is their own number (the one the "
                             "clinic dials), not the clinic's")

    @property
    def random_seed(self) -> int:
        return self.seed if self.seed is not None else zlib.crc32(self.name.encode())

    @property
    def outbound(self) -> bool:
        """They answer a call the clinic places."""
        return self.direction == "outbound"

    @property
    def goal(self) -> Task | None:
        """An outbound persona's goal as the callee (their first task); None inbound."""
        return self.tasks[0] if self.outbound else None

    @property
    def own_phone(self) -> str:
        """Their own number: the one they call from, or the one the clinic dials."""
        return self.caller.phone or (self.to_number if self.outbound else self.from_number)

    def has(self, habit: Habit) -> bool:
        return habit in self.habits


def load_persona(path: str | Path) -> Persona:
    """Read and validate one persona file; PersonaError names every bad key."""
    return load_yaml_model(path, Persona, kind="persona",
                           shape="name, from, caller, tasks", error=PersonaError)


def persona_files(path: str | Path) -> list[Path]:
    """A persona file, or every `*.yaml` in a folder (sorted); PersonaError if none."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.yaml"))
        if not files:
            raise PersonaError(f"no persona files (*.yaml) in {path}")
        return files
    if not path.exists():
        raise PersonaError(f"cannot read persona {path}: no such file or folder")
    return [path]


def load_personas(path: str | Path) -> list[Persona]:
    """Every persona at `path` (a file or a folder); names must be unique."""
    personas = [load_persona(file) for file in persona_files(path)]
    seen: set[str] = set()
    for persona in personas:
        if persona.name in seen:
            raise PersonaError(f"two personas are named {persona.name!r}")
        seen.add(persona.name)
    return personas
