"""Twilio's conferences as the stand-in plays them (twilio.com/docs/voice/twiml/conference,
/docs/voice/api/conference-resource, /docs/voice/api/conference-participant-resource).

A call's `<Dial><Conference>NAME</Conference></Dial>` enters the conference NAME of the
account, made on first use (`init`). It starts (`in-progress`) once two participants are
in and one of them came with `startConferenceOnEnter` (true by default); until then each
participant waits on hold music (`waitUrl` is not fetched: "hold" is what they hear). A
participant leaving with `endConferenceOnExit` ends it, and so does the last one leaving:
every other participant is put out, and their `<Dial>` returns. A conference that ended
stays readable; the same name dialled again makes a new one (a new CF SID).

Status callbacks: the first participant whose `<Conference>` names a `statusCallback`
sets the conference's URL, method and events (`statusCallbackEvent`, default `start
end`); later ones are ignored. Each event (conference-start, conference-end,
participant-join, participant-leave, participant-mute / -unmute, participant-hold /
-unhold) is posted in the order it happened, form-encoded and signed, with
ConferenceSid, FriendlyName, AccountSid, StatusCallbackEvent, Timestamp (RFC 2822) and
SequenceNumber (from 1), and for a participant's events (conference-start included:
the participant whose entry started it) CallSid, Muted, Hold, Coaching,
EndConferenceOnExit and StartConferenceOnEnter; a leave adds ReasonParticipantLeft and
ParticipantCallStatus, the end ReasonConferenceEnded, CallSidEndingConference and
Reason. On a start the joiner's participant-join goes first; on an end each
participant-leave goes before conference-end.

A participant's `beep` (true, false, onEnter, onExit) is heard as "beep" by the others
(but those on hold). Muting leaves what a participant says on the call's forks.
"""

from __future__ import annotations

import asyncio
import secrets
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from twilio.request_validator import RequestValidator

from simulator.twilio_wire import Sent, deliver, rfc2822, webhook_tls

# The statusCallbackEvent words and the events each subscribes to.
EVENT_WORDS: dict[str, tuple[str, ...]] = {
    "start": ("conference-start",), "end": ("conference-end",),
    "join": ("participant-join",), "leave": ("participant-leave",),
    "mute": ("participant-mute", "participant-unmute"),
    "hold": ("participant-hold", "participant-unhold"),
}
DEFAULT_EVENTS = "start end"
HOLD = "hold"
BEEP = "beep"
CALLBACK_TIMEOUT_S = 5.0


def twiml_bool(value: str | None, default: bool) -> bool:
    """A TwiML boolean attribute: `true` / `false` in any case, absent is the default."""
    if value is None:
        return default
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class ConferenceOptions:
    """What a `<Conference>` noun asks for, with Twilio's defaults."""

    name: str
    muted: bool = False
    beep: str = "true"
    start_on_enter: bool = True
    end_on_exit: bool = False
    wait_url: str | None = None
    status_callback: str = ""
    status_callback_method: str = "POST"
    status_callback_event: str = DEFAULT_EVENTS
    label: str | None = None

    @classmethod
    def of(cls, noun: ET.Element) -> ConferenceOptions:
        return cls(
            name=" ".join((noun.text or "").split()),
            muted=twiml_bool(noun.get("muted"), False),
            beep=noun.get("beep", "true"),
            start_on_enter=twiml_bool(noun.get("startConferenceOnEnter"), True),
            end_on_exit=twiml_bool(noun.get("endConferenceOnExit"), False),
            wait_url=noun.get("waitUrl"),
            status_callback=noun.get("statusCallback", ""),
            status_callback_method=noun.get("statusCallbackMethod", "POST").upper(),
            status_callback_event=noun.get("statusCallbackEvent") or DEFAULT_EVENTS,
            label=noun.get("participantLabel"),
        )

    def beeps_on(self, moment: str) -> bool:
        """Whether the others hear a beep when this participant `enter`s or `exit`s."""
        value = self.beep.strip().lower()
        return value == "true" or value == f"on{moment}"


@dataclass
class Participant:
    """One call in a conference. `heard` is that leg's record of what its person heard
    (hold music and the others' beeps are added to it); `removed` is set when the
    conference puts the participant out (it ended), which returns their `<Dial>`."""

    call_sid: str
    conference_sid: str
    account_sid: str
    options: ConferenceOptions
    heard: list[str]
    muted: bool
    joined_at: datetime
    left_at: datetime | None = None
    hold: bool = False
    updated_at: datetime | None = None
    removed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def present(self) -> bool:
        return self.left_at is None

    def resource(self, api: str) -> dict[str, Any]:
        """The Participant resource as Twilio answers it."""
        uri = (f"{api}/Accounts/{self.account_sid}/Conferences/{self.conference_sid}"
               f"/Participants/{self.call_sid}.json")
        return {
            "account_sid": self.account_sid, "call_sid": self.call_sid,
            "call_sid_to_coach": None, "coaching": False,
            "conference_sid": self.conference_sid,
            "date_created": rfc2822(self.joined_at),
            "date_updated": rfc2822(self.updated_at or self.joined_at),
            "end_conference_on_exit": self.options.end_on_exit, "hold": self.hold,
            "label": self.options.label, "muted": self.muted, "queue_time": "0",
            "start_conference_on_enter": self.options.start_on_enter,
            "status": "connected" if self.present else "complete", "uri": uri,
        }

    def fields(self) -> dict[str, str]:
        """The participant's fields in a conference status callback."""
        return {
            "CallSid": self.call_sid, "Muted": _flag(self.muted), "Hold": _flag(self.hold),
            "Coaching": "false", "EndConferenceOnExit": _flag(self.options.end_on_exit),
            "StartConferenceOnEnter": _flag(self.options.start_on_enter),
        }


@dataclass
class ConferenceState:
    """One conference instance: its participants (present and gone, by call SID), its
    status (`init`, `in-progress`, `completed`) and every status callback it posted
    (`callbacks`). `started` / `ended` are set as it starts and ends; `settled` once
    its last callback has been posted after the end."""

    sid: str
    friendly_name: str
    account_sid: str
    status: str = "init"
    participants: dict[str, Participant] = field(default_factory=dict)
    callbacks: list[Sent] = field(default_factory=list)
    status_callback: str = ""
    status_callback_method: str = "POST"
    subscribed: frozenset[str] = frozenset()
    reason_ended: str | None = None
    call_sid_ending: str | None = None
    date_created: datetime = field(default_factory=lambda: datetime.now(UTC))
    date_updated: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    outbox: asyncio.Queue[tuple[str, dict[str, str]] | None] = field(
        default_factory=asyncio.Queue)

    def present(self) -> list[Participant]:
        return [p for p in self.participants.values() if p.present]

    def events(self) -> list[str]:
        """The StatusCallbackEvent of every callback posted, in order."""
        return [sent.params["StatusCallbackEvent"] for sent in self.callbacks]

    def resource(self, api: str) -> dict[str, Any]:
        """The Conference resource as Twilio answers it."""
        uri = f"{api}/Accounts/{self.account_sid}/Conferences/{self.sid}"
        return {
            "account_sid": self.account_sid, "api_version": "2010-04-01",
            "call_sid_ending_conference": self.call_sid_ending,
            "date_created": rfc2822(self.date_created),
            "date_updated": rfc2822(self.date_updated),
            "friendly_name": self.friendly_name,
            "reason_conference_ended": self.reason_ended, "region": "us1", "sid": self.sid,
            "status": self.status,
            "subresource_uris": {"participants": f"{uri}/Participants.json",
                                 "recordings": f"{uri}/Recordings.json"},
            "uri": f"{uri}.json",
        }

    def subscribe(self, options: ConferenceOptions) -> None:
        """The first participant naming a statusCallback sets the conference's."""
        if self.status_callback or not options.status_callback:
            return
        self.status_callback = options.status_callback
        self.status_callback_method = options.status_callback_method
        words = options.status_callback_event.replace(",", " ").split()
        self.subscribed = frozenset(event for word in words
                                    for event in EVENT_WORDS.get(word.lower(), ()))


def _flag(value: bool) -> str:
    return "true" if value else "false"


class ConferenceBridge:
    """The account's conferences: entering, leaving, ending, muting and holding, with
    the status callbacks each change posts. `by_name` holds the latest instance of each
    name (the stand-in's `conferences`), `instances` every one by SID."""

    def __init__(self, account_sid: str, auth_token: str, by_name: dict[str, ConferenceState],
                 sent: list[Sent]) -> None:
        self.account_sid = account_sid
        self.by_name = by_name
        self.instances: dict[str, ConferenceState] = {c.sid: c for c in by_name.values()}
        self._validator = RequestValidator(auth_token)
        self._sent = sent
        self._posting: set[asyncio.Task[None]] = set()

    # -- the calls in it ---------------------------------------------------------------

    def enter(self, options: ConferenceOptions, call_sid: str,
              heard: list[str]) -> tuple[ConferenceState, Participant]:
        """Put a call into the conference its `<Conference>` names (made if need be)."""
        conference = self._open(options.name)
        conference.subscribe(options)
        now = datetime.now(UTC)
        participant = Participant(call_sid, conference.sid, self.account_sid, options, heard,
                                  options.muted, now)
        others = conference.present()
        conference.participants[call_sid] = participant
        conference.date_updated = now
        self._announce(conference, "participant-join", participant.fields())
        if options.beeps_on("enter"):
            self._beep(others)
        if conference.status == "init":
            present = conference.present()
            if len(present) >= 2 and any(p.options.start_on_enter for p in present):
                self._start(conference, participant)
            else:
                heard.append(HOLD)
        return conference, participant

    def leave(self, conference: ConferenceState, call_sid: str, *, reason: str,
              call_status: str) -> None:
        """The call leaves (it hung up, or was given new TwiML): `reason` is Twilio's
        ReasonParticipantLeft, `call_status` the call's status as it leaves."""
        participant = conference.participants.get(call_sid)
        if participant is None or not participant.present:
            return
        self._out(conference, participant, reason, call_status)
        if participant.options.beeps_on("exit"):
            self._beep(conference.present())
        if conference.status == "completed":
            return
        if participant.options.end_on_exit:
            self.end(conference, "participant-with-end-conference-on-exit-left", by=call_sid)
        elif not conference.present():
            self.end(conference, "last-participant-left", by=call_sid)

    def end(self, conference: ConferenceState, reason: str = "conference-ended-via-api", *,
            by: str | None = None) -> None:
        """End the conference: everyone still in is put out, then conference-end."""
        if conference.status == "completed":
            return
        conference.status = "completed"
        conference.reason_ended, conference.call_sid_ending = reason, by
        for participant in conference.present():
            self._out(conference, participant, reason.replace("-", "_"), "in-progress")
            participant.removed.set()
        fields = {"ReasonConferenceEnded": reason, "Reason": _why_ended(reason, by)}
        if by is not None:
            fields["CallSidEndingConference"] = by
        self._announce(conference, "conference-end", fields)
        conference.ended.set()
        conference.outbox.put_nowait(None)

    def update(self, conference: ConferenceState, participant: Participant, *,
               muted: bool | None = None, hold: bool | None = None) -> None:
        """Mute / unmute or hold / unhold a participant (the Participants resource)."""
        now = datetime.now(UTC)
        if muted is not None and muted != participant.muted:
            participant.muted, participant.updated_at = muted, now
            event = "participant-mute" if muted else "participant-unmute"
            self._announce(conference, event, participant.fields())
        if hold is not None and hold != participant.hold:
            participant.hold, participant.updated_at = hold, now
            if hold:
                participant.heard.append(HOLD)
            event = "participant-hold" if hold else "participant-unhold"
            self._announce(conference, event, participant.fields())

    # -- lookups ---------------------------------------------------------------------

    def find(self, sid: str) -> ConferenceState | None:
        return self.instances.get(sid)

    def listed(self, friendly_name: str | None, status: str | None) -> list[ConferenceState]:
        """Newest first, as Twilio lists them."""
        return [c for c in reversed(self.instances.values())
                if (friendly_name is None or c.friendly_name == friendly_name)
                and (status is None or c.status == status)]

    async def close(self) -> None:
        for task in list(self._posting):
            task.cancel()
        await asyncio.gather(*self._posting, return_exceptions=True)

    # -- inside ------------------------------------------------------------------------

    def _open(self, name: str) -> ConferenceState:
        conference = self.by_name.get(name)
        if conference is not None and conference.status != "completed":
            return conference
        conference = ConferenceState("CF" + secrets.token_hex(16), name, self.account_sid)
        self.by_name[name] = conference
        self.instances[conference.sid] = conference
        task = asyncio.create_task(self._post_all(conference), name=f"conference-{name[:16]}")
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)
        return conference

    def _beep(self, participants: list[Participant]) -> None:
        """Heard by everyone in but those on hold (they hear the hold music)."""
        for participant in participants:
            if not participant.hold:
                participant.heard.append(BEEP)

    def _start(self, conference: ConferenceState, by: Participant) -> None:
        conference.status = "in-progress"
        conference.date_updated = datetime.now(UTC)
        conference.started.set()
        self._announce(conference, "conference-start", by.fields())

    def _out(self, conference: ConferenceState, participant: Participant, reason: str,
             call_status: str) -> None:
        participant.left_at = conference.date_updated = datetime.now(UTC)
        self._announce(conference, "participant-leave", {
            **participant.fields(), "ReasonParticipantLeft": reason,
            "ParticipantCallStatus": call_status})

    def _announce(self, conference: ConferenceState, event: str,
                  fields: dict[str, str]) -> None:
        params = {"ConferenceSid": conference.sid, "FriendlyName": conference.friendly_name,
                  "AccountSid": self.account_sid, "StatusCallbackEvent": event,
                  "Timestamp": rfc2822(datetime.now(UTC)), **fields}
        conference.outbox.put_nowait((event, params))

    async def _post_all(self, conference: ConferenceState) -> None:
        """Post the conference's events one after another, in the order they happened,
        until its end has been posted."""
        sequence = 0
        try:
            async with httpx.AsyncClient(timeout=CALLBACK_TIMEOUT_S, verify=webhook_tls()) as http:
                while (item := await conference.outbox.get()) is not None:
                    event, params = item
                    if not conference.status_callback or event not in conference.subscribed:
                        continue
                    sequence += 1
                    await deliver(http, self._validator, conference.callbacks,
                                  kind="conference", call_sid=params.get("CallSid", ""),
                                  url=conference.status_callback,
                                  params={**params, "SequenceNumber": str(sequence)},
                                  method=conference.status_callback_method)
                    self._sent.append(conference.callbacks[-1])
        finally:
            conference.settled.set()


def _why_ended(reason: str, by: str | None) -> str:
    """The conference-end callback's Reason, in words."""
    if reason == "participant-with-end-conference-on-exit-left":
        return f"Participant {by} with endConferenceOnExit left the conference"
    if reason == "last-participant-left":
        return f"Last participant {by} left the conference"
    return "Conference ended via API"
