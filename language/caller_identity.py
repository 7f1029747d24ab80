"""Who the caller says they are, in any turn: names (also spelled out), birth dates, phone.

Callers front-load: "Hi, this is Jamie Cole, born July 9th 1972, I need a physio". The
engine keeps what they volunteer so it can confirm it rather than ask again. A name is
the words after an introduction ("my name is", "this is", "I'm") up to the first word
that is not a name; a birth date needs a cue ("born", "date of birth") unless it was
asked for or is a full date long past; a spelled word ("R-E-I-D") is the caller's own
spelling and wins over what was heard. Word lists are data (`data/caller_words.yaml`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from language.fields import normalize_phone
from language.phrases import normalize, phrase_pattern
from language.understanding import MONTHS, date_of_birth, full_year, spoken_numbers_to_digits

WORDS_FILE = Path(__file__).parent / "data" / "caller_words.yaml"
# Introductions that need two name words ("I'm Jamie Cole"), or one followed by "here"
# or "speaking": after them a single word is as often a feeling ("I'm desperate").
WEAK_CUES = frozenset({"it's", "it is", "this is", "i'm", "i am", "here is"})
NAME_ENDINGS = frozenset({"here", "speaking", "calling"})
# A full date this many years back, said unprompted, is a birth date, not a visit.
UNCUED_BIRTH_YEARS = 10


class CallerWords(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name_cues: list[str] = Field(min_length=1)
    not_names: list[str] = Field(min_length=1)
    birth_cues: list[str] = Field(min_length=1)
    spelled_doubles: list[str] = Field(min_length=1)

    @field_validator("not_names", mode="before")
    @classmethod
    def _split(cls, words: object) -> object:
        return words.split() if isinstance(words, str) else words

    @field_validator("not_names", "spelled_doubles")
    @classmethod
    def _single_words(cls, words: list[str]) -> list[str]:
        bad = [w for w in words if not re.fullmatch(r"[a-z']+", str(w))]
        if bad:
            raise ValueError(f"single lower-case words only: {bad}")
        return words


@dataclass(frozen=True)
class IdentityWords:
    cues: re.Pattern[str]
    not_names: frozenset[str]
    birth_cues: re.Pattern[str]
    doubles: frozenset[str]


@lru_cache(maxsize=1)
def identity_words(path: Path = WORDS_FILE) -> IdentityWords:
    words = CallerWords.model_validate(yaml.safe_load(path.read_text()))
    return IdentityWords(
        cues=phrase_pattern(words.name_cues),
        not_names=frozenset(words.not_names),
        birth_cues=phrase_pattern(words.birth_cues),
        doubles=frozenset(words.spelled_doubles),
    )


def _tokens(text: str) -> list[str]:
    """Words and clause marks, lower case: 'Jamie Cole, born' → ['jamie', 'cole', ',', 'born']."""
    return re.findall(r"[a-z][a-z'\-]*|\d+(?:st|nd|rd|th)?|[,.;:!?]", normalize(text))


def _is_name_word(word: str, words: IdentityWords) -> bool:
    return (re.fullmatch(r"[a-z][a-z'\-]{1,30}", word) is not None
            and word not in words.not_names and not _is_letter_run(word)
            and not re.search(r"\d", spoken_numbers_to_digits(word)))  # "seventy": no name


def _is_letter_run(word: str) -> bool:
    return re.fullmatch(r"[a-z](?:-[a-z])+", word) is not None


def capitalized(word: str) -> str:
    """'okafor-nair' → 'Okafor-Nair', "o'brien" → "O'Brien"."""
    return re.sub(r"(^|[-'])([a-z])", lambda m: m.group(1) + m.group(2).upper(), word)


def introduced_name(text: str, *, asked: bool = False) -> list[str]:
    """The name a caller introduces themselves with ('this is Jamie Cole' → ['Jamie',
    'Cole']), or [] when they did not. When their name was just asked for, "it's Dorothy"
    is enough; otherwise one word after "it's" or "I'm" is as often a feeling."""
    words = identity_words()
    spoken = " ".join(_tokens(text))
    found: list[list[str]] = []
    for cue in words.cues.finditer(spoken):
        after = spoken[cue.end():].split()
        name: list[str] = []
        for word in after:
            if not _is_name_word(word, words) or len(name) == 3:
                break
            name.append(word)
        following = after[len(name)] if len(after) > len(name) else ""
        weak = cue.group(0) in WEAK_CUES and not asked
        if name and (not weak or len(name) >= 2 or following in NAME_ENDINGS):
            found.append(name)
    if asked:  # "It's Winifred, love. Winifred Ash.": a sentence that is only a name
        for sentence in re.split(r"[.!?;]", normalize(text)):
            tokens = [t for t in _tokens(sentence) if t not in ",:"]
            if 1 <= len(tokens) <= 3 and all(_is_name_word(t, words) for t in tokens):
                found.append(tokens)
    found.append([w.lower() for w in _name_then_here(spoken, words)])
    best = max(found, key=len)  # the fullest form of the name they gave
    return [capitalized(w) for w in best]


def _name_then_here(spoken: str, words: IdentityWords) -> list[str]:
    """'Jamie Cole here', 'hi, Jamie speaking' → the name before the ending."""
    match = re.search(r"(?:^|[,.] |^(?:hi|hello|hey) )((?:[a-z][a-z'\-]+ ){1,2})"
                      r"(?:here|speaking)\b", spoken)
    if match is None:
        return []
    name = match.group(1).split()
    if all(_is_name_word(w, words) for w in name):
        return [capitalized(w) for w in name]
    return []


def answered_name(text: str) -> list[str]:
    """The name words of an answer to "what's your name?" ('it's Sam Nair' → ['Sam',
    'Nair']; 'Sam' → ['Sam']); an introduction wins, then the name-like words."""
    heard = introduced_name(text, asked=True) or short_name(text)
    spelled = spelled_words(text)
    if len(spelled) >= len(heard):
        return spelled[:3]
    for word in spelled:  # the caller's spelling replaces the word it spells
        closest = max(range(len(heard)), key=lambda i: _likeness(word, heard[i]))
        heard[closest] = word
    return heard


# An answer longer than this many words is talk around a name, not the name itself.
SHORT_ANSWER_WORDS = 6


def short_name(text: str) -> list[str]:
    """The name words of a short answer ('Obi.', 'no, Reid', 'Dorothy Baker please');
    nothing from a longer one, where other words would be taken for names."""
    words = identity_words()
    tokens = [t for t in _tokens(text) if t not in ",.;:!?"]
    if len(tokens) > SHORT_ANSWER_WORDS:
        return []
    return [capitalized(t) for t in tokens if _is_name_word(t, words)][:3]


def spelled_words(text: str) -> list[str]:
    """Words spelled out letter by letter ('R-E-I-D', 'r e i d', 'R double E D') → ['Reid']."""
    doubles = identity_words().doubles
    found: list[str] = []
    letters: list[str] = []
    double = False

    def flush() -> None:
        if len(letters) >= 2 and set(letters) - {"a", "i"}:
            found.append(capitalized("".join(letters)))
        letters.clear()

    for chunk in normalize(text).split() + [""]:
        chunk = chunk.strip(",;:!?")
        if re.fullmatch(r"[a-z](?:[\-.][a-z])+\.?", chunk):  # "r-e-i-d": a word of its own
            flush()
            found.append(capitalized(re.sub(r"[\-.]", "", chunk)))
        elif re.fullmatch(r"[a-z]\.?", chunk):
            letters.append(chunk[0] * (2 if double else 1))
            double = False
        elif chunk in doubles and letters:
            double = True
        else:
            flush()
            double = False
    return found


def closer_to_first(spelled: str, first: str | None, last: str | None) -> bool:
    """Whether a spelled word corrects the first name rather than the last (by likeness)."""
    if not first:
        return False
    if not last:
        return True
    return _likeness(spelled, first) > _likeness(spelled, last)


def _likeness(one: str, other: str) -> float:
    return SequenceMatcher(None, one.lower(), other.lower()).ratio()


def volunteered_birth_date(text: str, today: date, *, asked: bool) -> date | None:
    """A birth date in the caller's words: any full date (bare numbers too) when one was
    asked for or the caller says it is a birth date; else only a full date long past."""
    if asked or identity_words().birth_cues.search(normalize(text)):
        return date_of_birth(text, today, bare=True)
    born = date_of_birth(text, today)
    if born is not None and born.year <= today.year - UNCUED_BIRTH_YEARS:
        return born
    return None


def corrected_birth_date(text: str, born: date, today: date) -> date | None:
    """A birth date with one part said again ('the year is nineteen eighty one', 'it's
    April, not March', 'the twelfth'), or None when the turn changes no part of it."""
    spoken = spoken_numbers_to_digits(text)
    year, month, day = born.year, born.month, born.day
    found = re.search(r"\b(1[89]\d\d|20\d\d)\b", spoken)
    short = re.search(r"\byear(?: is|'s| was)? (\d{2})\b", spoken)
    if found:
        year = int(found.group(1))
    elif short:
        year = full_year(short.group(1), today)
    months = [m for m in MONTHS if re.search(rf"\b{m}\b", spoken)
              and not re.search(rf"\bnot {m}\b", spoken)]
    if months:
        month = MONTHS.index(months[-1]) + 1
    days = [int(d) for d in re.findall(r"\bthe (\d{1,2})(?:st|nd|rd|th)?\b", spoken)
            if not re.search(rf"\bnot the {d}\b", spoken)]
    if days:
        day = days[-1]
    try:
        corrected = date(year, month, day)
    except ValueError:
        return None
    return corrected if corrected != born and corrected < today else None


_PHONE = re.compile(r"\b(?:number|phone|mobile|cell|reach me|call me|text me)"
                    r"(?: is| on| at|:)?((?: ?\(?\d[\d\-. )]*){10,})")


def volunteered_phone(text: str, *, asked: bool = False, country_code: str = "1") -> str | None:
    """A phone number the caller gives ('my number is 312 555 0199'; when a number was
    asked for, the digits alone), E.164, or None."""
    spoken = spoken_numbers_to_digits(text, years=False)
    for match in _PHONE.finditer(spoken):
        phone = normalize_phone(match.group(1), country_code=country_code)
        if phone is not None:
            return phone
    return normalize_phone(spoken, country_code=country_code) if asked else None
