"""The vocabulary a finished call's re-transcription is told: the call's own keyterms,
then its clinic's lexicon (db/clinic_lexicon.py), de-duplicated like any keyterm list.

The batch pass is the accurate one, so it hears with everything the clinic might say;
the live recognizer keeps the short list its profile gives it. Deepgram documents up to
100 keyterms and 500 tokens of them per request: `for_deepgram` stays inside both
(a word is counted as two tokens, which names and drug names rarely exceed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import asyncpg

from call.voice_settings import call_keyterms, parse_voice_settings
from db.clinic_lexicon import call_clinic, clinic_lexicon
from services.keyterms import MAX_KEYTERMS, merge_keyterms

LOCAL_LEXICON_LIMIT = 300
DEEPGRAM_KEYTERMS = MAX_KEYTERMS
DEEPGRAM_KEYTERM_WORDS = 250


@dataclass(frozen=True)
class CallVocabulary:
    workspace_id: str | None = None
    service_id: str | None = None
    keyterms: tuple[str, ...] = ()  # what the call's live recognizer was given
    lexicon: tuple[str, ...] = ()  # the keyterms first, then the clinic's names

    def for_deepgram(self) -> list[str]:
        """The first terms of the lexicon within Deepgram's documented bounds."""
        chosen: list[str] = []
        words = 0
        for term in self.lexicon[:DEEPGRAM_KEYTERMS]:
            words += len(term.split())
            if words > DEEPGRAM_KEYTERM_WORDS:
                break
            chosen.append(term)
        return chosen


async def call_vocabulary(pool: asyncpg.Pool, call_id: str,
                          system_keyterms: Iterable[str]) -> CallVocabulary:
    """The call's effective keyterms (service, workspace, system, as its profile merged
    them) and its clinic's lexicon; empty for a call of no workspace."""
    clinic = await call_clinic(pool, call_id)
    if clinic is None:
        return CallVocabulary(keyterms=tuple(merge_keyterms(system_keyterms)))
    voice, _problems = parse_voice_settings(clinic.voice_settings)
    keyterms = call_keyterms(clinic.service_keyterms, voice, system_keyterms)
    lexicon = await clinic_lexicon(pool, clinic.workspace_id, clinic.service_id)
    return CallVocabulary(
        clinic.workspace_id, clinic.service_id, tuple(keyterms),
        tuple(merge_keyterms(keyterms, lexicon.terms(), limit=LOCAL_LEXICON_LIMIT)))
