"""Frames this project adds to Pipecat's vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.frames.frames import ControlFrame


@dataclass
class EndCallFrame(ControlFrame):
    """Ask the call controller to end the call once everything before it has been spoken.

    Pushed downstream behind the goodbye, it reaches the controller (after the output
    transport) only after the goodbye audio was handed to the caller.

    Parameters:
        reason: the completion reason to store (a `CompletionReason` value).
    """

    reason: str = "agent_hangup"
