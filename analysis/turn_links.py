"""Which turns a finding comes from: an event's moment, a write's turn, the caller's words."""

from __future__ import annotations

from db.call_analyses import CallRecord


def turn_at(record: CallRecord, at_ms: int | None) -> int | None:
    """The turn under way at `at_ms`: the last one that started by then (None: no
    moment, or the call's turns carry no timings)."""
    if at_ms is None:
        return None
    started = [t for t in record.turns if t.speech_start_ms is not None
               and t.speech_start_ms <= at_ms]
    return started[-1].seq if started else None


def caller_turn_before(record: CallRecord, seq: int | None) -> int | None:
    """The caller's last turn at or before `seq`: what a write or an event answered."""
    if seq is None:
        return None
    said = [t.seq for t in record.turns if t.role == "caller" and t.seq <= seq]
    return said[-1] if said else None


def linked(*seqs: int | None) -> tuple[int, ...]:
    """The distinct turn numbers among `seqs`, in order."""
    return tuple(sorted({s for s in seqs if s is not None}))


TRANSCRIPT_CHARS = 12000  # a model is shown the call's last this many characters


def numbered_transcript(record: CallRecord) -> str:
    """The call's turns for a model, one line each: "[seq] role: words" (its end when long)."""
    text = "\n".join(f"[{t.seq}] {t.role}: {' '.join(t.text.split())}" for t in record.turns
                     if t.text.strip())
    return text if len(text) <= TRANSCRIPT_CHARS else "…\n" + text[-TRANSCRIPT_CHARS:]
