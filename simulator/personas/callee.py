"""The persona as the person who answers a call the clinic places.

`CalleeRules.reply` reads the agent's turn first when the persona is `outbound`: who the
clinic asks for (they say it is them, or that it has the wrong number), then what the
call is about (a callback, a waitlisted slot, an appointment reminder, a check-in), and
answers it the way their goal says. Whatever is not about the clinic's call (a booking
they then make, "anything else?") it hands back as `PASS`, and the rule-based caller
answers it as on any call. Like the caller, it knows only what it heard and what it wants.
"""

from __future__ import annotations

from typing import Final, Protocol

from simulator.personas.model import Persona, Task
from simulator.personas.phrase_bank import PhraseBank
from simulator.personas.questions import AgentAsk, classify


class Progress(Protocol):
    """Where the caller is in their tasks (caller.CallerProgress)."""

    lines: int
    task_index: int
    done: list[bool]


class CallerSide(Protocol):
    """What the callee uses of the rule-based caller that plays the persona."""

    persona: Persona
    phrases: PhraseBank
    progress: Progress

    def values(self, task: Task | None = None) -> dict[str, str]: ...

    def finish(self, line: str) -> str: ...

    def clauses(self, tasks: list[Task]) -> str: ...

    def remaining_tasks(self) -> list[Task]: ...


class _Pass:
    """Not the clinic's call speaking: answered as on any call."""


PASS: Final = _Pass()
Reply = str | None | _Pass
# Turns read as any call's question when they ask nothing of the callee's goal.
_GENERIC = ("how_can_help", "anything_else", "other", "returned_call", "carry_on")
# After this many times hearing they are the wrong person, they hang up.
WRONG_PERSON_LIMIT = 3
OFFER_GOALS = ("accept_offer", "decline_offer")
REMINDER_GOALS = ("confirm_reminder", "cancel_reminder", "move_reminder")


class CalleeRules:
    """One outbound persona's side of the clinic's call (see the module docstring)."""

    def __init__(self, caller: CallerSide) -> None:
        self._caller = caller
        goal = caller.persona.goal
        assert goal is not None, "an outbound persona has a goal"
        self.goal = goal
        self.said_who = False  # they said it is them
        self.gave_birth_date = False
        self.wrong_person_said = 0
        self.chats = 0
        self.opted_out = False

    # -- the turn ---------------------------------------------------------------------

    @property
    def goal_done(self) -> bool:
        return self._caller.progress.done[0]

    def reply(self, ask: AgentAsk) -> Reply:
        """The callee's line to `ask`, None to hang up, or PASS (answer it as any call)."""
        kind = self.goal.kind
        if kind == "opt_out":
            return self._opt_out(ask)
        if kind == "wrong_person":
            return self._wrong_person(ask)
        handler = {
            "right_person": self._right_person, "requester": self._requester,
            "date_of_birth": self._date_of_birth, "calling_about": self._calling_about,
            "offer_slot": self._offer, "slot_gone": self._slot_gone,
            "reminder": self._reminder, "opted_out": self._opted_out,
            "checkin_greeting": self._checkin, "checkin_memory": self._checkin,
            "checkin_task": self._checkin, "checkin_chat": self._checkin,
        }.get(ask.kind)
        if handler is not None:
            return handler(ask)
        return self._otherwise(ask)

    # -- who is on the line -------------------------------------------------------------

    def _is_me(self, name: str | None) -> bool:
        """Whether the name the clinic asks for is theirs (none said: they take it so)."""
        if not name:
            return True
        facts = self._caller.persona.caller
        mine = {facts.first_name.lower(), facts.last_name.lower()}
        return any(word.lower() in mine for word in name.split())

    def _right_person(self, ask: AgentAsk) -> Reply:
        phrases = self._caller.phrases
        if not self._is_me(ask.asked_for):
            return phrases.say("not_me", asked=ask.asked_for or "")
        again = self.said_who
        self.said_who = True
        return phrases.say("speaking_again" if again else "speaking",
                           **self._caller.values())

    def _requester(self, ask: AgentAsk) -> Reply:
        self.said_who = True
        if self.goal.kind == "take_callback":
            return self._caller.phrases.say("requested_call")
        return self._caller.phrases.say("speaking", **self._caller.values())

    def _date_of_birth(self, ask: AgentAsk) -> Reply:
        self.gave_birth_date = True
        return PASS  # said as to any call, the persona's own way

    # -- what the call is about -----------------------------------------------------------

    def _calling_about(self, ask: AgentAsk) -> Reply:
        if self.goal.kind != "take_callback" or self.goal_done:
            return PASS
        self._goal_met()
        if classify(ask.text).kind not in _GENERIC:
            return PASS  # the call went straight to a question: answered as asked
        return self._then_or_thanks("callback_then", "callback_thanks")

    def _offer(self, ask: AgentAsk) -> Reply:
        if self.goal.kind not in OFFER_GOALS or self.goal_done:
            return PASS
        self._goal_met()
        return self._caller.phrases.say(self.goal.kind)

    def _slot_gone(self, ask: AgentAsk) -> Reply:
        if self.goal.kind not in OFFER_GOALS:
            return PASS
        self._goal_met()
        return self._then_or_thanks("slot_gone_then", "slot_gone")

    def _reminder(self, ask: AgentAsk) -> Reply:
        if self.goal.kind not in REMINDER_GOALS or self.goal_done:
            return PASS
        phrases = self._caller.phrases
        if self.goal.kind == "confirm_reminder":
            self._goal_met()
            return phrases.say("reminder_yes")
        # cancelling or moving it is done at their yes to the agent's read-back
        return phrases.say("reminder_cancel" if self.goal.kind == "cancel_reminder"
                           else "reminder_move")

    def _opted_out(self, ask: AgentAsk) -> Reply:
        return self._caller.finish(self._caller.phrases.say("thanks_goodbye"))

    def _checkin(self, ask: AgentAsk) -> Reply:
        if self.goal.kind != "checkin":
            return PASS
        phrases = self._caller.phrases
        if ask.kind == "checkin_greeting":
            return self.goal.words or phrases.say("checkin_how")
        if ask.kind == "checkin_memory":
            return phrases.say("checkin_memory")
        if ask.kind == "checkin_task":
            return phrases.say("checkin_task_done")
        self.chats += 1
        return phrases.say("checkin_chat" if self.chats == 1 else "checkin_wind_down")

    def _otherwise(self, ask: AgentAsk) -> Reply:
        """A turn that is not about the clinic's call, read with what the goal needs."""
        kind, goal = ask.kind, self.goal.kind
        if kind in ("how_can_help", "anything_else") and not self.goal_done and (
                goal == "checkin" or (goal == "take_callback" and self.said_who)):
            self._goal_met(advance=False)  # they heard the call out; the caller goes on
            return PASS
        if kind == "confirm_booking" and goal in OFFER_GOALS and not self.goal_done:
            return self._offer(ask)  # the offer put as a plain "shall I book it?"
        if kind == "other" and ask.question is None:
            if self._caller.progress.lines == 1:  # the clinic has not spoken yet
                return self._caller.phrases.say("answer_phone")
            if self.goal_done:  # "We'll see you then."
                return self._then_or_thanks("next_task", "thanks_goodbye")
            if goal == "checkin":  # "I've made a note that it's done."
                return self._caller.phrases.say("checkin_ack")
        return PASS

    # -- goals that end the call ----------------------------------------------------------

    def _opt_out(self, ask: AgentAsk) -> Reply:
        """Who they are, as asked, until their line comes; then "don't call me again"."""
        caller = self._caller
        if self.opted_out:
            if ask.kind in ("goodbye", "opted_out"):
                return caller.finish(caller.phrases.say("goodbye"))
            self.opted_out = False  # asked once more, then they hang up
            return caller.finish(caller.phrases.say("opt_out_again"))
        if caller.progress.lines >= self.goal.say_at:
            self.opted_out = True
            self._goal_met()
            return self.goal.words or caller.phrases.say("opt_out")
        if ask.kind == "right_person":
            return self._right_person(ask)
        if ask.kind == "requester":
            return self._requester(ask)
        return PASS

    def _wrong_person(self, ask: AgentAsk) -> Reply:
        """Not the person asked for: they say so, and hang up on a clinic that persists."""
        caller = self._caller
        if ask.kind == "goodbye":
            return caller.finish(caller.phrases.say("goodbye"))
        self.wrong_person_said += 1
        if self.wrong_person_said >= WRONG_PERSON_LIMIT:
            return None
        self._goal_met()
        if self.wrong_person_said > 1:
            return caller.phrases.say("wrong_person_again")
        if self.goal.words:
            return self.goal.words
        if ask.kind == "right_person" and ask.asked_for:
            return caller.phrases.say("wrong_person_named", asked=ask.asked_for)
        return caller.phrases.say("wrong_person")

    # -- progress ---------------------------------------------------------------------

    def _goal_met(self, *, advance: bool = True) -> None:
        """The goal is done; with `advance`, the caller takes up their next task now."""
        progress = self._caller.progress
        progress.done[0] = True
        if advance and progress.task_index == 0 and len(progress.done) > 1:
            progress.task_index = 1

    def _then_or_thanks(self, then_key: str, thanks_key: str) -> str:
        """Their next task, asked for, or thanks and goodbye when they want nothing more."""
        caller = self._caller
        remaining = caller.remaining_tasks()
        if remaining:
            return caller.phrases.say(then_key, clauses=caller.clauses(remaining))
        return caller.finish(caller.phrases.say(thanks_key))
