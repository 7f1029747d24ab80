"""The booking graph's tools: the state's gate and the guards first, then the database.

Every result is human-readable text, never database internals: slots are `S1`, `S2`,
bookings `A1`, `A2`, and the ids behind them never leave the server. Writes only ever
name the patient this call identified; an id the caller or the model supplies is never
trusted. Each call is recorded with its error class: `guard` when refused, `pms` when
the clinic system failed, `conflict` when the slot was just taken by someone else (the
next free one is offered in its place), `timeout` for a write the database did not
confirm in time (it may have gone through: the clinic is asked to check, in the operator
queue), `other` for other timeouts and the rest. The bound holds even on a frozen
database (`db.deadline.within`). Nothing here raises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
from loguru import logger

from call.call_session import CallLog
from db import companion, memories, outbound, waitlist, world
from db import scheduling as db
from db.call_backs import (
    CALLBACK_PRIORITY,
    RED_FLAG_PRIORITY,
    URGENT_PRIORITY,
    CallBackAsk,
    request_call_back,
)
from db.deadline import DatabaseUnavailable, within
from db.memories import MemoryCandidate
from db.slots import Slot, spread
from db.world import EventDraft
from flows import guards
from flows.clinic_calendar import answer, place_named, understand, week_hours
from flows.graph import ContextGraph
from flows.graph_session import GraphSession
from flows.navigator import took_action
from flows.outbound_tools import OutboundRefused, OutboundTools
from flows.post_booking_tools import NothingToDo, NotReached, PostBookingTools
from flows.promised_calls import caller_of
from flows.reach import Reach
from flows.recalls import offered
from flows.world_tools import WorldRefused, WorldTools
from language.fields import normalize_phone, parse_date
from language.spoken import say_date, say_list, say_phone, say_price, say_time
from processors.world.index import WorldIndex
from processors.world.write_safety import WriteDeduplicator, target_outside_scope
from services.embeddings import LocalEmbedder
from services.practice.base import PMSError, PracticeSystem, SlotConflict
from services.practice.builtin import BuiltinPractice

TOOL_TIMEOUT_S = 3.0
# The operator-queue concept of a write the database did not confirm in time.
UNCONFIRMED_WRITE_CONCEPT = "write_unconfirmed"
SLOTS_READ_OUT = 2
SEARCH_DAYS = 14
# What the agent says when a taken slot's replacement is offered: a read-back, so the
# caller's next yes confirms exactly the new time.
READ_BACK_ACTION = "final_slot_confirmation"
# The tools whose success is a promise that the clinic will call: their failure says so.
PROMISE_TOOLS = frozenset({"EscalateToHuman", "ScheduleOutboundCall", "AddToWaitlist"})
# The writes that make a booking: each is followed by the booking's links and its
# confirmation text where the state offers them (flows/post_booking_tools.py).
BOOKING_WRITES = frozenset({"CreateAppointment", "RescheduleAppointment"})
# Deciding what follows a booking (the patient's opt-out, the visit's type) may take this.
FOLLOW_UP_CHECK_S = 1.0


@dataclass(frozen=True)
class ToolResult:
    text: str
    error_class: str | None = None  # None: it worked

    @property
    def ok(self) -> bool:
        return self.error_class is None


class Refused(Exception):
    """The handler found the request unsafe or impossible (classified `guard`)."""


class NoCallBack(Refused):
    """No call back can be arranged (the caller asked not to be called, or there is no
    number to call); the message says why."""


class SlotWasTaken(Exception):
    """The slot went to someone else since it was offered (classified `conflict`); the
    message says what is offered instead."""


Handler = Callable[[Mapping[str, Any]], Awaitable[str]]


def unknown_tools(graph: ContextGraph) -> list[str]:
    """Tools the graph names that have no handler here (empty: all can run)."""
    return sorted(set(graph.tools) - set(HANDLERS))


class GraphTools:
    """One call's tools over the scheduling world model."""

    def __init__(
        self, graph: ContextGraph, session: GraphSession, pool: asyncpg.Pool, log: CallLog, *,
        today: Callable[[], date] = date.today, clinic_transfer_number: str | None = None,
        timeout_s: float = TOOL_TIMEOUT_S, index: WorldIndex | None = None,
        practice: PracticeSystem | None = None, clock: Callable[[], float] = time.monotonic,
        country_code: str = "1", now: Callable[[], datetime] = lambda: datetime.now(UTC),
        dialled_number: str | None = None, reach: Reach | None = None, clinic_name: str = "",
    ) -> None:
        """`reach`: how this deployment texts patients (and makes links) beyond the call."""
        self.graph, self.session, self.pool, self.log = graph, session, pool, log
        self._today = today
        self._wall_clock = now
        self._transfer_number = clinic_transfer_number
        self._dialled_number = dialled_number
        self._timeout_s = timeout_s
        self.practice = practice or BuiltinPractice(pool)
        self.world = WorldTools(session, pool, log, index or WorldIndex(LocalEmbedder()), today,
                                country_code, now, dialled_number)
        self.outbound = OutboundTools(session, pool, log, self.practice, now)
        self.post_booking = PostBookingTools(session, pool, log, reach or Reach(), clinic_name,
                                             dialled_number)
        self.dedup: WriteDeduplicator[ToolResult] = WriteDeduplicator(clock=clock)
        self._part_of_day: str | None = None  # what the last search was narrowed to
        self._handlers: dict[str, Handler] = {
            name: partial(run, self) for name, run in HANDLERS.items()
        }
        missing = unknown_tools(graph)
        if missing:
            raise ValueError(f"graph {graph.id!r} names tools with no handler: {missing}")

    async def call(
        self, state: str, name: str, args: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """Run one tool for `state`; the result is recorded and returned, never raised."""
        args = self._resolve_refs(dict(args or {}))
        started_ms, started = self.log.elapsed_ms(), time.perf_counter()
        tool_call_id = self.log.tool_started(name, args)
        writes = self._writes(name)
        result = self._refusal(state, name, args, writes=writes)
        if result is None:
            result = await (self._write_once(name, args) if writes else self._run(name, args))
        self.log.tool_call(
            name, args, result.text, started_ms=started_ms,
            duration_ms=int((time.perf_counter() - started) * 1000),
            error_class=result.error_class,
            error_message=result.text if result.error_class else None,
            tool_call_id=tool_call_id,
        )
        if result.ok and name in BOOKING_WRITES:
            result = await self._follow_through(state, result)
        return result

    async def _follow_through(self, state: str, booked: ToolResult) -> ToolResult:
        """What follows a booking where the state offers it: the visit's links, then
        its confirmation text. What the caller hears after the booking: a link that could
        not be made, then what became of the text (a link made is in the text). The
        booking stands whatever happens to them."""
        after = after_booking(self.graph, state)
        allowed = self.graph.state_tools.get(after, frozenset())
        try:
            tools = await within(self.post_booking.follow_ups(allowed), FOLLOW_UP_CHECK_S,
                                 what="what follows the booking")
        except Exception as error:  # noqa: BLE001 - nothing is promised; the booking stands
            self.log.event("text_not_sent", kind="confirmation", reason=type(error).__name__)
            return booked
        links = [tool for tool in tools if tool != "SendTextMessage"]
        made = await asyncio.gather(*(self.call(after, tool, {}) for tool in links))
        said = [booked.text, *(result.text for result in made if not result.ok)]
        if "SendTextMessage" in tools:
            said.append((await self.call(after, "SendTextMessage", {"kind": "confirmation"})).text)
        return replace(booked, text=" ".join(said))

    def _writes(self, name: str) -> bool:
        spec = self.graph.tools.get(name)
        return spec is not None and spec.kind == "write"

    def _refusal(self, state: str, name: str, args: Mapping[str, Any], *,
                 writes: bool) -> ToolResult | None:
        """Why this call may not run (None: it may): write scope first, then the gates."""
        if writes:
            identified = self.session.patient.id if self.session.patient else None
            outside = target_outside_scope(args, identified)
            if outside is not None:
                self.log.event("write_scope_refused", tool=name)
                return ToolResult(f"blocked: {outside}", "guard")
        reason = guards.check(self.graph, state, name, self.session, args)
        return ToolResult(f"blocked: {reason}", "guard") if reason is not None else None

    async def _write_once(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        """Run a write; repeated with the same arguments within the TTL it returns the
        first result (successes only: a failure can always be retried)."""
        key_args = {k: v for k, v in args.items() if k != "user_quote"}
        cached = self.dedup.cached(name, key_args)
        if cached is not None:
            self.log.event("write_deduplicated", tool=name)
            return cached
        result = await self._run(name, args)
        if result.ok:
            self.dedup.remember(name, key_args, result)
        return result

    async def _run(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        result = await self._attempt(name, args)
        if result.ok or name not in PROMISE_TOOLS or result.error_class == "timeout":
            return result
        # A promise that failed is said to have failed: never "the clinic will call".
        self.log.event("call_not_arranged", tool=name, error_class=result.error_class)
        number = self.clinic_number()
        instead = (f"offer the clinic's number, {say_phone(number)}, to call instead"
                   if number else "ask them to call the clinic again later")
        return ToolResult(f"{result.text} No call from the clinic was arranged: do not say "
                          f"the clinic will call; {instead}.", result.error_class)

    async def _attempt(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        try:
            text = await within(self._handlers[name](args), self._timeout_s, what=f"tool {name}")
            return ToolResult(text)
        except (Refused, WorldRefused, OutboundRefused) as refusal:
            return ToolResult(f"blocked: {refusal}", "guard")
        except NotReached as not_reached:  # said as it is: nothing is promised
            return ToolResult(str(not_reached), "other")
        except NothingToDo as nothing:
            return ToolResult(f"blocked: {nothing}", "guard")
        except PMSError as error:
            logger.warning(f"tool {name}: practice system error ({str(error)[:120]})")
            return ToolResult("The clinic system is not answering right now.", "pms")
        except SlotWasTaken as taken:
            return ToolResult(str(taken), "conflict")
        except db.SlotTaken:
            return ToolResult("That time was just taken by someone else; offer another.",
                              "conflict")
        except db.NotFound:
            return ToolResult(
                "blocked: that record is not one of this caller's (or is already done).", "guard"
            )
        except DatabaseUnavailable as error:
            if error.timed_out and self._writes(name):
                return self._unconfirmed(name)
            logger.warning(f"tool {name}: clinic system unavailable ({error.reason})")
            if error.timed_out:
                return ToolResult("The clinic system did not answer in time.", "other")
            return ToolResult("The clinic system is not answering right now.", "pms")
        except (asyncpg.PostgresError, OSError, ConnectionError) as error:
            logger.warning(f"tool {name}: clinic system error ({type(error).__name__})")
            return ToolResult("The clinic system is not answering right now.", "pms")
        except TimeoutError:
            return ToolResult("The clinic system did not answer in time.", "other")
        except Exception as error:  # noqa: BLE001 - a tool failure is a result, never a crash
            logger.exception(f"tool {name} failed")
            return ToolResult(f"That did not work ({type(error).__name__}).", "other")

    def _unconfirmed(self, name: str) -> ToolResult:
        """A write the database did not confirm in time may still have gone through: it is
        on record, the clinic is asked (operator queue) to check it, and the caller is
        told exactly that rather than that nothing changed. No call back is promised: its
        task would be written to the database that just failed to answer."""
        logger.warning(f"tool {name}: the database did not confirm the write in time")
        self.log.event("write_unconfirmed", tool=name, waited_ms=int(self._timeout_s * 1000))
        self.log.escalation(
            UNCONFIRMED_WRITE_CONCEPT, "soft", similarity=None, judge=None,
            reason=f"{name} was not confirmed in time: check whether it went through, "
                   "then call the caller back")
        number = self.clinic_number()
        instead = (f"offer the clinic's number, {say_phone(number)}, to check"
                   if number else "ask them to call the clinic later to check")
        return ToolResult(
            "The clinic system did not confirm this in time, so it may or may not have gone "
            "through; the clinic team will see it and check. No call back was arranged: do "
            f"not say the clinic will call; {instead}.",
            "timeout")

    def _resolve_refs(self, args: dict[str, Any]) -> dict[str, Any]:
        """`A1` → the appointment id behind it (unknown refs stay as given and fail guards)."""
        refs = self.session.appointment_refs
        if "appointment_ref" in args:
            ref = str(args.pop("appointment_ref"))
            args["appointment_id"] = refs[ref].id if ref in refs else ref
        if "appointment_refs" in args:
            given = [str(r) for r in args.pop("appointment_refs")]
            args["appointment_ids"] = [refs[r].id if r in refs else r for r in given]
        if "reminder_ref" in args:
            ref = str(args.pop("reminder_ref"))
            reminders = self.session.reminder_refs
            args["reminder_id"] = reminders[ref].id if ref in reminders else ref
        return args

    def _now(self) -> datetime:
        return self._wall_clock()

    # --- Reads ---------------------------------------------------------------------

    def _suitable(self, slots: list[Slot]) -> list[Slot]:
        """The slots on days the caller can do, with their practitioner or at their
        location when they named one (all of them when none is left)."""
        session = self.session
        fitting = [s for s in slots if s.starts_at.weekday() not in session.not_weekdays]
        for wanted, of in ((session.practitioner, lambda s: s.practitioner_name),
                           (session.location, lambda s: s.location_name)):
            if wanted:
                named = [s for s in fitting if of(s) == wanted]
                fitting = named or fitting
        return fitting

    async def _patient_details(self, args: Mapping[str, Any]) -> str:
        """Exact lookup by name, date of birth, phone or MRN (DOB preferred). The caller is
        identified only by a date of birth together with their name or MRN; other matches
        are counted, never read out."""
        session = self.session
        dob = parse_date(args.get("date_of_birth"), self._today())
        mrn = str(args.get("mrn") or "").strip() or None
        phone = (normalize_phone(str(args["phone"]), country_code=self.world.country_code)
                 if args.get("phone") else None)
        named = args.get("first_name") or args.get("last_name")
        if named or dob or mrn or phone:
            if named:
                found = [p.id for p in await db.find_patients(
                    self.pool, session.workspace_id, first_name=args.get("first_name"),
                    last_name=args.get("last_name"), date_of_birth=dob)]
            else:
                found = [p.id for p in await world.patients_by_fields(
                    self.pool, session.workspace_id, date_of_birth=dob, phone=phone, mrn=mrn)]
            if len(found) == 1 and dob is not None and (named or mrn):
                record = (await world.patients_by_ids(self.pool, found))[0]
                self.world.identify(record)
                session.upcoming = await db.upcoming_appointments(
                    self.pool, record.id, self._now())
                session.outcome = "identified"
                return f"Identified the caller: {record.full_name}."
            if not found:
                return "No single patient matches those details."
            return (f"{len(found)} records match; ask for the date of birth and full name."
                    if len(found) > 1 else "One record matches; confirm their date of birth "
                    "and name to identify them.")
        if session.patient is not None:
            return f"The caller is {session.patient.full_name}."
        if len(session.phone_matches) > 1:
            return f"{len(session.phone_matches)} patients share this phone; ask who is calling."
        return "No patient is registered with this phone number."

    async def _services_and_pricing(self, args: Mapping[str, Any]) -> str:
        await self._load_services()
        return say_list([
            f"{t.name}, {t.duration_min} minutes, {say_price(t.price_cents, t.currency)}"
            for t in self.session.services
        ])

    async def _appointment_types(self, args: Mapping[str, Any]) -> str:
        await self._load_services()
        return " ".join(f"{t.name}: {t.description}" for t in self.session.services)

    async def _load_services(self) -> None:
        if not self.session.services:
            self.session.services = await db.appointment_types(self.pool, self.session.service_id)
        self.session.services_read = True

    async def _location_info(self, args: Mapping[str, Any]) -> str:
        """Hours, open now or not and the next opening, a day's hours (closures included)
        and addresses, per location, from the clinic's data: from the caller's own words
        (`question`), or the fields the model fills, which win."""
        session, now = self.session, self._now()
        if not session.locations:
            return "The clinic has no locations on record; offer a callback."
        question = understand(str(args.get("question") or ""), session.locations,
                              session.closures, now)
        if args.get("location"):
            place = place_named(str(args["location"]), session.locations)
            if place is None:
                raise Refused("no location of that name; the locations are "
                              + say_list([loc.name for loc in session.locations]))
            question = replace(question, place=place)
        if args.get("date"):
            try:
                day = date.fromisoformat(str(args["date"]))
            except ValueError:
                raise Refused("the date must be written YYYY-MM-DD") from None
            question = replace(question, day=day, weekday=None)
        about = args.get("about")
        if about == "open_now":
            question = replace(question, now=True)
        elif about == "address":
            question = replace(question, where=True)
        return answer(question, session.locations, session.closures, now)

    def calendar_answer(self, caller_words: str) -> str:
        """The answer to a caller's question about hours or places, in their words."""
        session, now = self.session, self._now()
        return answer(understand(caller_words, session.locations, session.closures, now),
                      session.locations, session.closures, now)

    async def _check_availability(self, args: Mapping[str, Any]) -> str:
        session = self.session
        kind = session.appointment_type
        if args.get("appointment_type"):
            await self._load_services()
            wanted = str(args["appointment_type"]).lower()
            named = [t for t in session.services if t.name.lower() == wanted]
            if not named:
                raise Refused("that appointment type is not offered; read the services first")
            kind = named[0]
        if kind is None:
            raise Refused("the appointment type is not known yet")
        today = self._today()
        first, last = session.days or (today, today + timedelta(days=SEARCH_DAYS - 1))
        self._part_of_day = args.get("part_of_day") or session.part_of_day
        slots = await self.practice.available_slots(
            session.service_id, appointment_type=kind, first_day=first,
            last_day=last, now=self._now(), part_of_day=self._part_of_day,
        )
        slots = self._suitable(slots)
        widened = False
        if not slots and session.days is not None:
            # nothing when they asked: the fortnight from their first day, never a day
            # before it ("tomorrow morning" is never answered with today's times)
            slots = self._suitable(await self.practice.available_slots(
                session.service_id, appointment_type=kind, first_day=first,
                last_day=first + timedelta(days=SEARCH_DAYS - 1), now=self._now(),
            ))
            widened = bool(slots)
        if not slots:
            return f"No {kind.name} times are open in the next {SEARCH_DAYS} days."
        offered = session.offer(spread(slots, SLOTS_READ_OUT))
        session.picked_slot = None
        session.outcome = "slots_offered"
        found = " ".join(
            f"{ref}: {say_time(slot.starts_at)} with {slot.practitioner_name}"
            f" at {slot.location_name}."
            for ref, slot in offered
        )
        return (f"Nothing is open when they asked; say so, then offer the nearest after it. "
                f"{found}" if widened else found)

    async def _convert_timezone(self, args: Mapping[str, Any]) -> str:
        moment = datetime.fromisoformat(str(args["time"]))
        source, target = ZoneInfo(str(args["from_timezone"])), ZoneInfo(str(args["to_timezone"]))
        converted = moment.replace(tzinfo=moment.tzinfo or source).astimezone(target)
        return f"{say_time(converted)} {args['to_timezone']}"

    async def _booked_appointments(self, args: Mapping[str, Any]) -> str:
        session = self.session
        if session.patient is None:
            raise Refused("the caller is not identified yet")
        session.upcoming = await db.upcoming_appointments(
            self.pool, session.patient.id, self._now()
        )
        if not session.upcoming:
            return "No upcoming appointments."
        return " ".join(
            f"{ref}: {a.type_name} with {a.practitioner_name} at {a.location_name}, "
            f"{say_time(a.local_start)}."
            for ref, a in session.appointment_refs.items()
        )

    # --- Writes (guards have passed) -----------------------------------------------

    async def _add_to_waitlist(self, args: Mapping[str, Any]) -> str:
        patient = self._patient()
        kind = self.session.appointment_type
        entry = await db.add_to_waitlist(
            self.pool, patient_id=patient.id, appointment_type_id=kind.id if kind else None,
            note=str(args.get("note", "")), call_id=self.session.call_id,
        )
        await self._record_write("AddToWaitlist", EventDraft(
            "waitlist_added", f"Waitlist: {kind.name if kind else 'any appointment'}.",
            {"appointment_type": kind.name if kind else None, "note": str(args.get("note", ""))},
            patient.id, "waitlist_entries", entry))
        what = f"a {kind.name.lower()}" if kind else "an appointment"
        if not await outbound.may_call(self.pool, self.session.workspace_id,
                                       patient_id=patient.id, phone=None):
            return (f"Added to the waitlist for {what}, but they asked not to be called, so "
                    "the clinic will not call when a time opens: tell them to call and ask.")
        return (f"Added to the waitlist for {what}. This is not a booking: only if such a time "
                "opens up (someone cancels) will the clinic call them, during its opening "
                "hours, to offer it.")

    async def _create_patient(self, args: Mapping[str, Any]) -> str:
        said = await self.world.create_patient(args)
        patient = self._patient()
        self.session.upcoming = await db.upcoming_appointments(self.pool, patient.id, self._now())
        return said

    async def _create_appointment(self, args: Mapping[str, Any]) -> str:
        return await self._book("CreateAppointment", str(args["slot_ref"]), replaces=None)

    async def _reschedule_appointment(self, args: Mapping[str, Any]) -> str:
        return await self._book("RescheduleAppointment", str(args["slot_ref"]),
                                replaces=str(args["appointment_id"]))

    async def _book(self, tool: str, slot_ref: str, *, replaces: str | None) -> str:
        slot = self.session.offered[slot_ref]
        outcome = await self.practice.book(
            slot, patient_id=self._patient().id, call_id=self.session.call_id,
            replaces=replaces,
        )
        if isinstance(outcome, SlotConflict):
            raise SlotWasTaken(await self._offer_instead(tool, outcome))
        if outcome.practice_status == "pending":  # held here; the job queue writes it there
            self.log.event("practice_write_deferred", tool=tool, practice=self.practice.name,
                           reason=outcome.deferred)
        await self._settle_waitlist_offer(slot)
        return await self._booked(outcome.appointment, tool, replaces=replaces)

    async def _settle_waitlist_offer(self, slot: Slot) -> None:
        """On a waitlist offer's call, booking the offered slot settles the offer: the
        slot's other offers still waiting are called off and the callee leaves the
        waitlist. The booking stands if that fails (the other calls hear the slot is gone
        when they try to book it); the call's record says so."""
        callee = self.session.callee
        offer = callee.call.offer if callee is not None else None
        if callee is None or callee.kind != "waitlist_offer" or not offer or not offered(
                slot, offer):
            return
        try:
            cancelled = await waitlist.settle_offer(self.pool, offer,
                                                    patient_id=self._patient().id)
        except (asyncpg.PostgresError, OSError) as error:
            logger.warning(f"waitlist offer not settled ({type(error).__name__})")
            self.log.event("waitlist_offer_unsettled", error=type(error).__name__)
            return
        self.log.event("waitlist_offer_settled", others_called_off=cancelled)

    async def _offer_instead(self, tool: str, conflict: SlotConflict) -> str:
        """The slot just went to someone else: the next free one from the same search (the
        caller's type, days, part of day, practitioner and location) is read back in its
        place for a fresh yes (a waitlist offer's slot: none, they stay on the waitlist);
        what happened is in the call record."""
        session, taken = self.session, conflict.slot
        session.confirmation = None
        session.picked_slot = None
        callee = session.callee
        if callee is not None and callee.offer is not None and callee.offer.key == taken.key:
            # a waitlist offer: another waitlisted patient said yes first; this one stays
            # on the waitlist (no other time is pressed on them)
            callee.slot_gone = True
            session.last_offer = []
            self.log.event("slot_taken", tool=tool, found_by=conflict.where,
                           next_offered=False, waitlist_offer=True)
            return ("That time was just taken by someone else; they stay on the waitlist "
                    "for the next opening.")
        instead = next_free(await self._same_search(taken), taken)
        self.log.event("slot_taken", tool=tool, found_by=conflict.where,
                       next_offered=instead is not None)
        if instead is None:
            session.last_offer = []
            return ("That time was just taken by someone else and no other time fits what "
                    "the caller asked for; offer a callback.")
        ((ref, _),) = session.offer([instead])
        session.picked_slot = ref
        took_action(session, READ_BACK_ACTION)
        return (f"That time was just taken by someone else. The next free time is {ref}: "
                f"{say_time(instead.starts_at)} with {instead.practitioner_name} at "
                f"{instead.location_name}; read it back and ask for a yes.")

    async def _same_search(self, taken: Slot) -> list[Slot]:
        """The caller's search run again for the taken slot's type."""
        session = self.session
        kind = next((t for t in [session.appointment_type, *session.services]
                     if t is not None and t.id == taken.appointment_type_id), None)
        if kind is None:
            return []
        today = self._today()
        fortnight = (today, today + timedelta(days=SEARCH_DAYS - 1))
        for first, last in dict.fromkeys([session.days or fortnight, fortnight]):
            slots = [s for s in await self.practice.available_slots(
                session.service_id, appointment_type=kind, first_day=first, last_day=last,
                now=self._now(), part_of_day=self._part_of_day or session.part_of_day,
            ) if s.key != taken.key]
            if slots:  # nothing left on their days: the fortnight, as a search widens
                return self._suitable(slots)
        return []

    async def _booked(self, appointment: db.Appointment, tool: str, *,
                      replaces: str | None = None) -> str:
        session = self.session
        session.booked.append(appointment)
        session.upcoming = None
        session.confirmation = None
        session.outcome = "booked"
        self._did("rescheduled" if replaces else "booked")
        said = (f"{appointment.type_name} with {appointment.practitioner_name} at "
                f"{appointment.location_name}, {say_time(appointment.local_start)}")
        await self._record_write(tool, EventDraft(
            "appointment_rescheduled" if replaces else "appointment_booked",
            f"{'Moved to' if replaces else 'Booked'}: {said}.",
            {"appointment_id": appointment.id, "starts_at": appointment.starts_at.isoformat(),
             "type": appointment.type_name, "practitioner": appointment.practitioner_name,
             "location": appointment.location_name, "replaces": replaces},
            appointment.patient_id, "appointments", appointment.id))
        return f"Booked: {said}."

    async def _record_write(self, tool: str, draft: EventDraft) -> None:
        """The clinical event of a scheduling write the caller explicitly confirmed (high
        confidence). The write itself has happened: failing to record it is logged, and
        the booking stands."""
        try:
            event_id = await world.write_event(self.pool, self.session.workspace_id, draft,
                                               self.world.provenance(tool, "high"))
        except (asyncpg.PostgresError, OSError) as error:
            logger.warning(f"tool {tool}: clinical event not recorded ({type(error).__name__})")
            self.log.event("clinical_event_failed", tool=tool, error=type(error).__name__)
            return
        self.world.wrote(event_id=event_id)

    async def _cancel_one(self, args: Mapping[str, Any]) -> str:
        return await self._cancel([str(args["appointment_id"])], "CancelAppt")

    async def _cancel_all(self, args: Mapping[str, Any]) -> str:
        return await self._cancel([str(i) for i in args["appointment_ids"]], "CancelAppointments")

    async def _cancel(self, ids: list[str], tool: str) -> str:
        patient = self._patient()
        cancelled = [
            await db.cancel(self.pool, i, patient_id=patient.id, call_id=self.session.call_id)
            for i in ids
        ]
        self.session.confirmation = None
        self.session.targets = []
        self.session.upcoming = await db.upcoming_appointments(self.pool, patient.id, self._now())
        self.session.outcome = "cancelled"
        self._did("cancelled")
        said = say_list([f"{a.type_name} on {say_time(a.local_start)}" for a in cancelled])
        for appointment in cancelled:
            await self._record_write(tool, EventDraft(
                "appointment_cancelled",
                f"Cancelled: {appointment.type_name} on {say_time(appointment.local_start)}.",
                {"appointment_id": appointment.id,
                 "starts_at": appointment.starts_at.isoformat()},
                patient.id, "appointments", appointment.id))
        return f"Cancelled: {said}."

    async def _confirm_appointment(self, args: Mapping[str, Any]) -> str:
        appointment = await db.confirm(
            self.pool, str(args["appointment_id"]), patient_id=self._patient().id,
            call_id=self.session.call_id,
        )
        said = f"{appointment.type_name} on {say_date(appointment.local_start.date())}"
        self.session.confirmation = None
        self.session.outcome = "confirmed"
        self._did("confirmed")
        await self._record_write("ConfirmAppointment", EventDraft(
            "appointment_confirmed", f"Confirmed: {said}.",
            {"appointment_id": appointment.id}, appointment.patient_id, "appointments",
            appointment.id))
        return f"Confirmed the {said}."

    async def _escalate(self, args: Mapping[str, Any]) -> str:
        """A callback request for the clinic team, and the callback task that calls the
        caller back in the next calling window, written together; the caller is told
        when. No task (they asked not to be called, or there is no number): no promise."""
        session, now = self.session, self._now()
        urgent, stay = bool(args.get("urgent", False)), bool(args.get("stay"))
        reason = str(args.get("reason", "caller asked for a person"))
        called = await request_call_back(
            self.pool, caller_of(session, self._dialled_number),
            CallBackAsk(reason=reason, message=str(args.get("message", "")), urgent=urgent,
                        priority=self._callback_priority(urgent),
                        written_by="tool:EscalateToHuman"), now)
        if called.promised:
            plan = called.plan
            session.call_time = plan.when(now)
            self.log.event("call_back_promised", task_id=called.task_id,
                           priority=self._callback_priority(urgent),
                           at=plan.at.isoformat() if plan.at else None)
        if stay:  # a person is fetched while the agent stays on the line
            session.crisis_escalated = True
            also = (f" The team will also call them back {session.call_time}."
                    if called.promised else "")
            return f"Urgent request logged; stay with the caller until a person takes over.{also}"
        if called.why_not:
            raise NoCallBack(f"the request is logged for the team, but {called.why_not}")
        session.outcome = "handed_off"
        return f"Callback request logged: the clinic team will call them back {session.call_time}."

    def _callback_priority(self, urgent: bool) -> int:
        if not urgent:
            return CALLBACK_PRIORITY
        return RED_FLAG_PRIORITY if self.session.red_flag else URGENT_PRIORITY

    def clinic_number(self) -> str | None:
        """The clinic's own number for a caller to ring: the front desk's, else the
        dialled location's, else any location's (None: none on record)."""
        locations = self.session.locations
        dialled = next((loc for loc in locations
                        if self._dialled_number and loc.phone_number == self._dialled_number),
                       None)
        return self._transfer_number or (dialled.phone_number if dialled else None) or next(
            (loc.phone_number for loc in locations if loc.phone_number), None)

    async def _transfer(self, args: Mapping[str, Any]) -> str:
        session = self.session
        number = self._transfer_number or next(
            (loc.phone_number for loc in session.locations if loc.phone_number), None
        )
        if number is None:
            raise Refused("no transfer number is configured; offer a callback instead")
        session.handoff_to = number
        session.outcome = "handed_off"
        return "The call will be transferred to the front desk after the goodbye."

    async def _put_through(self, args: Mapping[str, Any]) -> str:
        """Put the caller through to a person now: the location they name if it is open,
        else the one they dialled, else the front desk, else any open location. Numbers
        come from the clinic's records, never from the conversation."""
        session = self.session
        lines = session.open_lines
        if not session.can_put_through or not lines:
            raise Refused("nobody can be put through right now; offer a callback instead")
        named = place_named(str(args.get("location") or ""), session.locations)
        dialled = next((loc for loc in lines if loc.phone_number == self._dialled_number), None)
        chosen = (next((loc for loc in lines if named is not None and loc.id == named.id), None)
                  or dialled)
        if chosen is None and self._transfer_number:
            number, place = self._transfer_number, "the front desk"
        else:
            chosen = chosen or lines[0]
            number, place = str(chosen.phone_number), f"our {chosen.name} clinic"
        session.handoff_to = number
        session.outcome = "handed_off"
        self.log.event("put_through", place=place, named=named.name if named else None)
        return place

    # --- What the caller told earlier calls -------------------------------------------

    async def _search_memories(self, args: Mapping[str, Any]) -> str:
        """The identified caller's memories by meaning (by words when the embedder fails),
        with the day each was last said."""
        found = await memories.search(
            self.pool, self._patient().id, str(args.get("query", "")),
            self.world.index.sentences, policy=self.session.memory_policy)
        if not found:
            return "Nothing about that in earlier calls."
        return " ".join(f"On {say_date(m.reinforced_at.date())} they said: {m.text}"
                        for m in found)

    # --- Companion check-in calls ---------------------------------------------------

    async def _save_detail(self, args: Mapping[str, Any]) -> str:
        detail = str(args.get("detail", "")).strip()
        if not detail:
            raise Refused("there is no detail to save")
        await memories.remember(
            self.pool, self._patient().id,
            [MemoryCandidate(detail, "note", "agent", len(self.session.heard) or None)],
            self.world.index.sentences, self.session.call_id, policy=self.session.memory_policy)
        self.session.noted.append(detail)
        return "Noted for next time."

    async def _acknowledge_reminder(self, args: Mapping[str, Any]) -> str:
        reminder = await companion.acknowledge_reminder(
            self.pool, str(args["reminder_id"]), patient_id=self._patient().id,
            call_id=self.session.call_id,
        )
        session = self.session
        session.acknowledged.append(reminder)
        session.reminders = [r for r in session.reminders if r.id != reminder.id]
        session.reminder_in_focus = None
        session.confirmation = None
        return f"Marked done: {reminder.text}."

    def _did(self, what: str) -> None:
        """What an outbound call did for its task (the task's outcome detail)."""
        if self.session.callee is not None:
            self.session.callee.done.append(what)

    def _patient(self) -> db.Patient:
        if self.session.patient is None:
            raise Refused("the caller is not identified")
        return self.session.patient

    def opening_hours(self) -> str:
        return week_hours(self.session.locations)


def after_booking(graph: ContextGraph, state: str) -> str:
    """The state a booking written in `state` leads to (its `outcome: booked` exit): its
    tools are what may follow the booking."""
    return next((exit_.to for exit_ in graph.exits_of(state)
                 if exit_.when and exit_.when.get("outcome") == "booked"), state)


def next_free(slots: list[Slot], taken: Slot) -> Slot | None:
    """The slot to offer in place of a taken one: the earliest at or after it (with the
    same practitioner at the same place first when several start together), else the
    earliest of all."""
    if not slots:
        return None
    later = [s for s in slots if s.starts_at >= taken.starts_at] or slots
    same_place = (taken.practitioner_id, taken.location_id)
    return min(later, key=lambda s: (s.starts_at,
                                     (s.practitioner_id, s.location_id) != same_place))


def _on_world(method: Callable[[WorldTools, Mapping[str, Any]], Awaitable[str]]
              ) -> Callable[[GraphTools, Mapping[str, Any]], Awaitable[str]]:
    """A world-model tool, run on the call's `WorldTools`."""

    def run(tools: GraphTools, args: Mapping[str, Any]) -> Awaitable[str]:
        return method(tools.world, args)

    return run


# Tool name (as graphs name it) → what runs it, given the call's tools and the arguments.
HANDLERS: dict[str, Callable[[GraphTools, Mapping[str, Any]], Awaitable[str]]] = {
    "GetPatientDetails": GraphTools._patient_details,
    "GetServicesAndPricing": GraphTools._services_and_pricing,
    "GetAppointmentTypes": GraphTools._appointment_types,
    "GetLocationInfo": GraphTools._location_info,
    "CheckAvailability": GraphTools._check_availability,
    "ConvertTimezone": GraphTools._convert_timezone,
    "AddToWaitlist": GraphTools._add_to_waitlist,
    "GetCurrentlyBookedAppts": GraphTools._booked_appointments,
    "CreatePatient": GraphTools._create_patient,
    "CreateAppointment": GraphTools._create_appointment,
    "RescheduleAppointment": GraphTools._reschedule_appointment,
    "CancelAppt": GraphTools._cancel_one,
    "CancelAppointments": GraphTools._cancel_all,
    "ConfirmAppointment": GraphTools._confirm_appointment,
    "EscalateToHuman": GraphTools._escalate,
    "TransferCall": GraphTools._transfer,
    "TransferToPerson": GraphTools._put_through,
    # after a booking (flows/post_booking_tools.py)
    "SendTextMessage": lambda tools, args: tools.post_booking.send_text(args),
    "GetTelehealthLink": lambda tools, args: tools.post_booking.get_video_link(args),
    "CreatePaymentLink": lambda tools, args: tools.post_booking.create_payment_link(args),
    "CheckPaymentStatus": lambda tools, args: tools.post_booking.check_payment(args),
    # the world model (flows/world_tools.py)
    "SearchPatients": _on_world(WorldTools.search_patients),
    "SearchClinicalEvents": _on_world(WorldTools.search_events),
    "UpdatePatient": _on_world(WorldTools.update_patient),
    "SavePatient": _on_world(WorldTools.save_patient),
    "CreateInsurance": _on_world(WorldTools.create_insurance),
    "SetContactPreference": _on_world(WorldTools.set_preference),
    "ScheduleOutboundCall": _on_world(WorldTools.schedule_outbound),
    # outbound calls (flows/outbound_tools.py)
    "SetDoNotCall": lambda tools, args: tools.outbound.set_do_not_call(args),
    "CheckOfferedSlot": lambda tools, args: tools.outbound.check_offered_slot(args),
    # what the caller told earlier calls (the booking graph's name, and the check-in's)
    "SearchMemories": GraphTools._search_memories,
    "search_memories": GraphTools._search_memories,
    "save_important_detail": GraphTools._save_detail,
    "mark_reminder_acknowledged": GraphTools._acknowledge_reminder,
}
