"""Accuracy and speed of the grammar pass that verifies captured fields from the audio.

Each utterance is spoken by eSpeak NG at 8 kHz (the phone rate, rendered in a fresh
process so it sounds the same on every run) and decoded through `FieldRecognizer`, the
production front (one worker process, grammar held to the field's kind). A reading is
right when its canonical value equals the one said. Unrelated speech is sent through each
grammar too: it should come back with no value or a low score. Prints a short table.

The utterances are written apart from the tests and from the development set the
decoder settings were chosen on.

    python -m bench.field_grammar
"""

from __future__ import annotations

import lib.process_env  # noqa: F401  (first: sets native thread counts)

# isort: split

import argparse
import statistics
import time
from dataclasses import dataclass

from loguru import logger

from bench.harness import percentile
from bench.report import measured_line, write_section
from lib import event_loop
from processors.world.field_grammar import FIELD_KINDS, FieldKind, FieldReading, FieldRecognizer
from services.espeak.engine import synthesize_script

RATE = 8000
TIMEOUT_S = 30.0

# (kind, what the caller says, the canonical value)
UTTERANCES: list[tuple[FieldKind, str, str]] = [
    ("phone", "four one five, two six eight, three nine oh seven", "+14152683907"),
    ("phone", "my number is seven one eight, five five five, oh one four two", "+17185550142"),
    ("phone", "two oh six, three four one, double eight two nine", "+12063418829"),
    ("phone", "it's nine one two, eight oh five, four four six one", "+19128054461"),
    ("phone", "one, three one two, nine four seven, two two eight five", "+13129472285"),
    ("phone", "six one seven, four two nine, five zero three eight", "+16174295038"),
    ("phone", "my cell number is five oh three, two two one, nine six four seven", "+15032219647"),
    ("phone", "eight four seven, three three two, one zero nine one", "+18473321091"),
    ("date", "july fourth nineteen sixty two", "1962-07-04"),
    ("date", "the twenty third of november nineteen eighty", "1980-11-23"),
    ("date", "my date of birth is january ninth nineteen fifty five", "1955-01-09"),
    ("date", "april the second two thousand and seven", "2007-04-02"),
    ("date", "october thirty first nineteen ninety nine", "1999-10-31"),
    ("date", "the first of june nineteen seventy", "1970-06-01"),
    ("date", "december twelve nineteen forty four", "1944-12-12"),
    ("date", "i was born on august eighteenth nineteen eighty six", "1986-08-18"),
    ("member_id", "w seven three two nine one four", "W732914"),
    ("member_id", "my member id is r four four eight one two zero", "R448120"),
    ("member_id", "x y z one two three four five", "XYZ12345"),
    ("member_id", "k nine eight zero zero two one", "K980021"),
    ("member_id", "h m o five five one two nine", "HMO55129"),
    ("member_id", "b c three six two eight four", "BC36284"),
    ("member_id", "q two seven seven four one", "Q27741"),
    ("member_id", "it's j d four nine zero three eight", "JD49038"),
]

UNRELATED = [
    "I would like to move my appointment to Thursday afternoon.",
    "Sorry, can you say that again?",
    "Hang on, let me find my insurance card.",
    "Yes, that's right.",
]


@dataclass(frozen=True)
class Trial:
    kind: FieldKind
    expected: str | None
    reading: FieldReading | None
    seconds: float

    @property
    def right(self) -> bool:
        return self.reading is not None and self.reading.value == self.expected


async def decode_all(recognizer: FieldRecognizer, cases: list[tuple[FieldKind, str | None]],
                     audio: list[bytes]) -> list[Trial]:
    trials = []
    for (kind, expected), pcm in zip(cases, audio, strict=True):
        started = time.perf_counter()
        reading = await recognizer.recognize(pcm, RATE, kind, timeout_s=TIMEOUT_S)
        trials.append(Trial(kind, expected, reading, time.perf_counter() - started))
    return trials


def mean_score(trials: list[Trial]) -> str:
    scores = [t.reading.score for t in trials if t.reading is not None]
    return f"{statistics.mean(scores):.1f}" if scores else "-"


def report(trials: list[Trial], unrelated: list[Trial], start_s: float, verbose: bool) -> str:
    lines = [
        "## Grammar pass (audio verification) — accuracy and speed",
        "",
        measured_line("python -m bench.field_grammar"),
        "",
        f"eSpeak NG speech at {RATE} Hz through `FieldRecognizer` (1 worker, warm; start-up "
        f"{start_s:.2f} s). Right = canonical value equal to the one said.",
        "",
        "| Field | Right | Score, right / wrong | Unrelated: no value or score <= 3 "
        "| Decode p50 / p95 |",
        "|---|---|---|---|---|",
    ]
    for kind in FIELD_KINDS:
        mine = [t for t in trials if t.kind == kind]
        right = [t for t in mine if t.right]
        wrong = [t for t in mine if not t.right]
        other = [t for t in unrelated if t.kind == kind]
        rejected = sum(
            t.reading is None or t.reading.value is None or t.reading.score <= 3 for t in other
        )
        seconds = [t.seconds for t in mine + other]
        lines.append(
            f"| {kind} | {len(right)}/{len(mine)} | {mean_score(right)} / {mean_score(wrong)} "
            f"| {rejected}/{len(other)} | {percentile(seconds, 50) * 1000:.0f} / "
            f"{percentile(seconds, 95) * 1000:.0f} ms |"
        )
    every = [t.seconds for t in trials + unrelated]
    lines += [
        "",
        f"All {len(every)} decodes: p50 {percentile(every, 50) * 1000:.0f} ms, "
        f"p95 {percentile(every, 95) * 1000:.0f} ms (request to reading, inter-process "
        "transfer included).",
    ]
    if verbose:  # synthetic values only: nothing here belongs to a caller
        lines += ["", "| Field | Said | Heard | Value | Score |", "|---|---|---|---|---|"]
        for t in trials:
            heard = t.reading.hypothesis if t.reading else "(no reading)"
            value = t.reading.value if t.reading else None
            score = t.reading.score if t.reading else "-"
            lines.append(f"| {t.kind} | {t.expected} | {heard} | {value} | {score} |")
    return "\n".join(lines)


async def main(verbose: bool) -> str:
    cases: list[tuple[FieldKind, str | None]] = [(k, v) for k, _, v in UTTERANCES]
    texts = [text for _, text, _ in UTTERANCES]
    cases += [(kind, None) for _ in UNRELATED for kind in FIELD_KINDS]
    texts += [text for text in UNRELATED for _ in FIELD_KINDS]
    audio = await synthesize_script([(text, {}) for text in texts], RATE)
    recognizer = FieldRecognizer(size=1)
    try:
        started = time.perf_counter()
        await recognizer.warm_up()
        start_s = time.perf_counter() - started
        trials = await decode_all(recognizer, cases, audio)
    finally:
        recognizer.shutdown()
    return report(trials[: len(UTTERANCES)], trials[len(UTTERANCES) :], start_s, verbose)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list every reading")
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args()
    logger.remove()
    logger.add(lambda m: print(m, end=""), level="WARNING")
    section = event_loop.run(main(args.verbose))
    print(section)
    if not args.no_docs and not args.verbose:
        write_section("field_grammar", section)


if __name__ == "__main__":
    cli()
