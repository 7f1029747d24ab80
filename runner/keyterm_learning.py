"""After a call's transcript is verified: the words the live recognizer missed become
proposed keyterms of the call's service (analysis/keyterm_suggestions.py finds them,
db/stt_suggestions.py keeps them for an operator to decide).

Bounded and never failing: the verification is stored before this runs, and a failure
here is a log line with the call id and the error type (what a caller said stays in the
database, never in a log).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import asyncpg
from loguru import logger

from analysis.keyterm_suggestions import HeardTurn, VerifiedSpeech, missed_words
from db.repositories import as_uuid
from db.stt_suggestions import record_misheard
from runner.call_vocabulary import CallVocabulary
from services.pocketsphinx.stt import keyterm_spellings

LEARN_TIMEOUT_S = 10.0


def _confidences(turn_words: Any) -> tuple[float | None, ...] | None:
    """A turn's word confidences as stored (`turns.words`), None when it has none."""
    if not isinstance(turn_words, list) or not turn_words:
        return None
    values = [w.get("confidence") if isinstance(w, dict) else None for w in turn_words]
    if all(v is None for v in values):
        return None
    return tuple(float(v) if isinstance(v, int | float) else None for v in values)


async def caller_turns(pool: asyncpg.Pool, call_id: str) -> list[HeardTurn]:
    """What the real-time recognizer wrote for the caller, turn by turn."""
    rows = await pool.fetch(
        "SELECT text, words FROM turns WHERE call_id = $1 AND speaker_role = 'caller' "
        "ORDER BY seq", as_uuid(call_id))
    return [HeardTurn(row["text"], _confidences(row["words"])) for row in rows]


async def propose_missed_keyterms(pool: asyncpg.Pool, call_id: str,
                                  verified: Sequence[VerifiedSpeech],
                                  vocabulary: CallVocabulary) -> int:
    """Record the words of the verified caller channel the live recognizer missed, for
    the call's service; how many suggestions it added to or created (0 for a call of
    no service)."""
    if vocabulary.workspace_id is None or vocabulary.service_id is None:
        return 0
    found = missed_words(verified, await caller_turns(pool, call_id),
                         keyterms=vocabulary.keyterms, lexicon=vocabulary.lexicon,
                         spellings=keyterm_spellings(vocabulary.lexicon))
    return await record_misheard(pool, vocabulary.workspace_id, vocabulary.service_id,
                                 call_id, found)


async def learn_after_verification(pool: asyncpg.Pool, call_id: str,
                                   verified: Sequence[VerifiedSpeech],
                                   vocabulary: CallVocabulary,
                                   timeout_s: float = LEARN_TIMEOUT_S) -> int:
    """`propose_missed_keyterms` within `timeout_s`; 0 and a log line when it fails."""
    try:
        async with asyncio.timeout(timeout_s):
            count = await propose_missed_keyterms(pool, call_id, verified, vocabulary)
    except Exception as error:  # noqa: BLE001 - the verification is stored either way
        logger.warning(f"call {call_id}: keyterm suggestions not derived "
                       f"({type(error).__name__})")
        return 0
    if count:
        logger.info(f"call {call_id}: {count} keyterm suggestion(s) for service "
                    f"{vocabulary.service_id}")
    return count
