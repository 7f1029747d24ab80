"""Records every turn of a call with its timings, stage by stage (fields below).

An observer, not a processor: Pipecat feeds observers from their own queue, so the
recorder never delays a frame. Times are milliseconds from the pipeline start,
read from the pipeline clock stamped on each push.

Timing fields (all ms, see observers/README.md):
- caller turn: user_speech_start_ms / user_speech_end_ms (VAD speech boundaries).
- agent turn: engine_ms (caller turn end -> first response text), nav_ms (navigator
  decision, filled by the context-graph engine), render_ms (first response text ->
  first synthesized audio), audio_ttfb_ms (caller turn end -> first agent audio),
  agent_speech_start_ms / agent_speech_end_ms (when the agent audio played).

Word timings (`words`, [{"word", "start_ms", "end_ms"}]) are on the **recording's**
clock instead, so a word leads straight to its audio: caller turns from the STT's
final transcripts, agent turns from the TTS word frames' `pts`
(call/word_timings.py); NULL when any part of the turn came without times.
The recording's clock is the caller audio received so far (call/recording.py);
it runs ahead of the pipeline clock by the caller audio that was already waiting when
the pipeline started (~0.2 s on a simulated call). The recorder counts caller audio
as it arrives and keeps the largest `audio received - now` as that offset (a late
frame only makes the difference smaller).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    ErrorFrame,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.utils.text.base_text_aggregator import TextType

from call.call_session import CallSession
from call.frames import NavigationFrame, SpokenTextFrame, ToneFrame
from call.word_timings import WordDict, caller_words, spoken_words
from processors.conversation.guidance_filter import strip_guidance
from processors.emotion.call_emotion import CallEmotion


@dataclass
class _CallerTurn:
    text: list[str] = field(default_factory=list)
    speech_start_ms: int | None = None
    speech_end_ms: int | None = None
    words: list[WordDict] | None = field(default_factory=list)  # None: some untimed


@dataclass
class _AgentTurn:
    reference_ms: int | None  # end of the caller turn this answers, if any
    llm_text: list[str] = field(default_factory=list)
    spoken_words: list[str] = field(default_factory=list)
    word_starts: list[tuple[str, int]] | None = field(default_factory=list)  # None: untimed
    first_text_ms: int | None = None
    first_audio_ms: int | None = None
    speech_start_ms: int | None = None
    speech_end_ms: int | None = None
    nav_ms: int | None = None
    tone: str | None = None
    interrupted: bool = False
    reply_ended: bool = False  # the LLM (or a line framed like it) finished this reply

    def text(self) -> str:
        spoken = " ".join(word.strip() for word in self.spoken_words if word.strip())
        # Without audio, the reply's text as the caller read it: the guidance stripper's
        # rules over the LLM's own frames.
        return spoken or strip_guidance("".join(self.llm_text))


def _delta(later: int | None, earlier: int | None) -> int | None:
    if later is None or earlier is None:
        return None
    return max(0, later - earlier)


class CallRecordObserver(BaseObserver):
    """Turns pipeline frames into caller and agent turn records."""

    def __init__(self, session: CallSession, *, emotion: CallEmotion | None = None,
                 **kwargs) -> None:
        # First pushes only: a frame's later hops through the pipeline tell us nothing,
        # and each one would cost a queue round trip per 20 ms audio frame.
        kwargs.setdefault("observe_every_push", False)
        super().__init__(**kwargs)
        self._session = session
        self._emotion = emotion
        self._t0_ns: int | None = None
        self._caller = _CallerTurn()
        self._agent: _AgentTurn | None = None
        self._last_caller_end_ms: int | None = None
        self._caller_audio_s = 0.0  # the recording's clock (call/recording.py)
        self._recording_offset_ms: int | None = None  # recording clock - pipeline clock

    def _ms(self, timestamp_ns: int) -> int:
        if self._t0_ns is None:
            self._t0_ns = timestamp_ns
        return (timestamp_ns - self._t0_ns) // 1_000_000

    async def on_push_frame(self, data: FramePushed) -> None:
        if not data.first_push:
            return
        frame = data.frame
        if isinstance(frame, StartFrame):
            self._t0_ns = data.timestamp
            return
        now = self._ms(data.timestamp)
        if isinstance(frame, InputAudioRawFrame):
            self._count_caller_audio(frame, now)
            return

        if isinstance(frame, (VADUserStartedSpeakingFrame, UserStartedSpeakingFrame)):
            if self._caller.speech_start_ms is None:
                self._caller.speech_start_ms = now
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._caller.speech_end_ms = now
        elif isinstance(frame, TranscriptionFrame):
            if frame.text.strip():
                self._caller.text.append(frame.text.strip())
                self._add_caller_words(frame)
            if self._caller.speech_start_ms is None:
                self._caller.speech_start_ms = now
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._close_caller_turn(now)
        elif isinstance(frame, InterruptionFrame):
            self._on_interruption(now)
        elif isinstance(frame, LLMFullResponseStartFrame):
            # Text sessions: each reply is a turn of its own (a check-in after a reply is
            # another turn, not more of the same one).
            agent = self._agent
            if (not self._session.is_audio and agent is not None and agent.reply_ended
                    and agent.text()):
                self._close_agent_turn()
            self._agent_turn()
        elif isinstance(frame, LLMFullResponseEndFrame):
            if self._agent is not None:
                self._agent.reply_ended = True
        elif isinstance(frame, LLMTextFrame) and not isinstance(frame, SpokenTextFrame):
            turn = self._agent_turn()
            turn.llm_text.append(frame.text)
            if turn.first_text_ms is None:
                turn.first_text_ms = now
        elif isinstance(frame, NavigationFrame):
            self._agent_turn().nav_ms = round(frame.nav_ms)
        elif isinstance(frame, ToneFrame):
            self._agent_turn().tone = frame.tone
        elif isinstance(frame, TTSTextFrame):
            turn = self._agent_turn()
            turn.spoken_words.append(frame.text)
            self._add_spoken_word(turn, frame)
            if turn.first_text_ms is None:
                turn.first_text_ms = now
        elif isinstance(frame, TTSAudioRawFrame):
            turn = self._agent_turn()
            if turn.first_audio_ms is None:
                turn.first_audio_ms = now
        elif isinstance(frame, BotStartedSpeakingFrame):
            turn = self._agent_turn()
            if turn.speech_start_ms is None:
                turn.speech_start_ms = now
        elif isinstance(frame, BotStoppedSpeakingFrame):
            if self._agent is not None and self._agent.speech_start_ms is not None:
                self._agent.speech_end_ms = now
                self._close_agent_turn()
        elif isinstance(frame, TTSStoppedFrame):
            # Text sessions have no bot-speaking frames: the synthesized words end the turn.
            if not self._session.is_audio and self._agent is not None and self._agent.spoken_words:
                self._close_agent_turn()
        elif isinstance(frame, ErrorFrame):
            self._session.log.event(
                "pipeline_error",
                source=type(data.source).__name__,
                fatal=bool(frame.fatal),
                category=getattr(frame.category, "value", None),
                error=str(frame.error)[:300],
            )

    async def flush(self) -> None:
        """Write whatever turn is still open (call ended mid-turn), and how the recording's
        clock relates to the turn times (`recording_clock`: recording ms = turn ms + offset)."""
        if self._recording_offset_ms is not None:
            self._session.log.event("recording_clock", offset_ms=self._recording_offset_ms)
        if self._caller.text:
            self._close_caller_turn(self._caller.speech_end_ms)
        if self._agent is not None:
            self._agent.interrupted = self._agent.speech_end_ms is None and self._session.is_audio
            self._close_agent_turn()

    def _count_caller_audio(self, frame: InputAudioRawFrame, now: int) -> None:
        rate, channels = frame.sample_rate, max(1, frame.num_channels)
        if rate:
            self._caller_audio_s += len(frame.audio) / (2 * channels * rate)
        offset = int(self._caller_audio_s * 1000) - now
        if self._recording_offset_ms is None or offset > self._recording_offset_ms:
            self._recording_offset_ms = offset

    def _on_recording(self, ms: int | None) -> int | None:
        """A pipeline-clock time on the recording's clock."""
        if ms is None:
            return None
        return ms + (self._recording_offset_ms or 0)

    def _add_caller_words(self, frame: TranscriptionFrame) -> None:
        caller = self._caller
        if caller.words is None:
            return
        # A streaming STT's stream starts with the call's first caller audio: the
        # recording's zero.
        words = caller_words(frame.result, self._on_recording(caller.speech_end_ms), 0)
        caller.words = None if words is None else caller.words + words

    def _add_spoken_word(self, turn: _AgentTurn, frame: TTSTextFrame) -> None:
        if turn.word_starts is None:
            return
        if frame.pts is None or frame.text_type != TextType.WORD or self._t0_ns is None:
            turn.word_starts = None  # a sentence frame (the greeting) has no word times
            return
        turn.word_starts.append((frame.text.strip(), (frame.pts - self._t0_ns) // 1_000_000))

    def _agent_turn(self) -> _AgentTurn:
        if self._agent is None:
            self._agent = _AgentTurn(reference_ms=self._last_caller_end_ms)
            self._last_caller_end_ms = None
        return self._agent

    def _on_interruption(self, now: int) -> None:
        agent = self._agent
        if agent is not None and agent.speech_start_ms is not None:
            agent.interrupted = True
            agent.speech_end_ms = now
            # What the caller cut off, for the next turn's prompt.
            self._session.conversation.reply_interrupted(agent.text() or None)
            self._close_agent_turn()

    def _close_caller_turn(self, now: int | None) -> None:
        caller = self._caller
        self._caller = _CallerTurn()
        text = " ".join(caller.text).strip()
        if not text:
            return
        end_ms = caller.speech_end_ms if caller.speech_end_ms is not None else now
        self._last_caller_end_ms = now
        # A new caller turn closes any agent turn still waiting for its audio.
        if self._agent is not None and self._agent.text():
            self._close_agent_turn()
        heard = {}
        if self._emotion is not None:  # how they sounded as the turn ended
            snapshot = self._emotion.snapshot()
            if snapshot.dominant is not None:
                heard = {"emotion": snapshot.dominant, "valence": snapshot.valence,
                         "arousal": snapshot.arousal}
        self._session.log.turn(
            speaker_id="caller",
            speaker_role="caller",
            text=text,
            user_speech_start_ms=caller.speech_start_ms,
            user_speech_end_ms=end_ms,
            words=caller.words or None,
            **heard,
        )
        self._session.conversation.tracker.caller_said(text)

    def _close_agent_turn(self) -> None:
        agent, self._agent = self._agent, None
        if agent is None:
            return
        text = agent.text()
        if not text:
            return
        repeated = self._session.conversation.tracker.agent_said(text)
        if repeated is not None:  # counts only: the question may carry the caller's name
            self._session.log.event("question_repeated", in_a_row=repeated.in_a_row,
                                    total=repeated.total)
        self._session.log.turn(
            speaker_id="agent",
            speaker_role="agent",
            text=text,
            interrupted=agent.interrupted,
            engine_ms=_delta(agent.first_text_ms, agent.reference_ms),
            nav_ms=agent.nav_ms,
            render_ms=_delta(agent.first_audio_ms, agent.first_text_ms),
            audio_ttfb_ms=_delta(agent.first_audio_ms, agent.reference_ms),
            agent_speech_start_ms=agent.speech_start_ms,
            agent_speech_end_ms=agent.speech_end_ms,
            words=(spoken_words([(w, self._on_recording(ms)) for w, ms in agent.word_starts],
                                self._on_recording(agent.speech_end_ms))
                   if agent.word_starts else None),
            tone=agent.tone,
        )
