"""What Twilio's reports about a placed call mean for its attempt (pure)."""

from __future__ import annotations

# Twilio's CallStatus values once a call is over.
TERMINAL = frozenset({"completed", "busy", "no-answer", "failed", "canceled"})
# AnsweredBy values that mean an answering machine (machine detection).
MACHINE = frozenset({"machine_start", "machine_end_beep", "machine_end_silence",
                     "machine_end_other"})
FAX = "fax"
# Outcomes after which the task is tried again while it has attempts left.
NOT_REACHED = frozenset({"voicemail", "no_answer", "busy", "failed"})
SAID = {
    "answered": "answered", "voicemail": "a message was left on a machine",
    "no_answer": "no answer", "busy": "the line was busy", "failed": "the call failed",
    "opted_out": "the callee asked not to be called",
}


def progress_of(status: str) -> str:
    """The attempt's progress for a call Twilio reports `status` (not over yet)."""
    return "in_progress" if status in ("in-progress", "answered") else "ringing"


def outcome_of(status: str, answered_by: str | None, *, reached_us: bool) -> str:
    """The outcome of a call that ended with `status`. `reached_us`: its answer webhook
    was handled (a call Twilio calls completed that never reached us failed for the
    callee: they heard Twilio's error, not the clinic)."""
    if status == "busy":
        return "busy"
    if status == "no-answer":
        return "no_answer"
    if status != "completed":
        return "failed"
    if answered_by in MACHINE:
        return "voicemail"
    if answered_by == FAX or not reached_us:
        return "failed"
    return "answered"
