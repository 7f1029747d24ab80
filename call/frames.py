"""Frames this project adds to Pipecat's vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.frames.frames import ControlFrame, DataFrame, LLMTextFrame


@dataclass
class EndCallFrame(ControlFrame):
    """Ask the call controller to end the call once everything before it has been spoken.

    Pushed downstream behind the goodbye, it reaches the controller (after the output
    transport) only after the goodbye audio was handed to the caller.

    Parameters:
        reason: the completion reason to store (a `CompletionReason` value).
    """

    reason: str = "agent_hangup"


@dataclass
class NavigationFrame(DataFrame):
    """The context-graph navigator's decision for the coming agent turn (for the call record).

    Parameters:
        nav_ms: how long the navigator took to decide.
        state: the state the turn landed in.
        action: the action the agent takes there.
        intent: what that action is about (its description: the tone chain reads it).
    """

    nav_ms: float = 0.0
    state: str = ""
    action: str = ""
    intent: str = ""


@dataclass
class ToneFrame(DataFrame):
    """The voice tone chosen for the coming agent turn (for the call record).

    Parameters:
        tone: the tone (calm, sympathetic, ...).
        level: which level of the tone chain chose it (1 burst ... 6 neutral).
        why: what fired it (a burst type, an emotion, a topic, momentum).
    """

    tone: str = "neutral"
    level: int = 6
    why: str = ""


@dataclass
class SpokenTextFrame(LLMTextFrame):
    """LLM text with the guidance taken out (processors/conversation/guidance_stripper_processor): what the TTS
    speaks. The call recorder reads the LLM's own frames and strips them the same way."""
