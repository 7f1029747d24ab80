"""Reading the LLM context, and the one place our code writes to it.

Pipecat's aggregators write the conversation: the caller's words, the agent's replies,
tool calls and their results, and guidance a layer pushes as a frame
(`guidance_message`). What else the model is told about a turn is written by the
functions below, called by one processor only, the one that stands at the LLM's door
for the turn: the graph navigator (flows/graph_navigator_processor.py), or in a call
without a context graph the caller-notes processor. Layers before it never edit the
context: they attach a note to the turn's context frame (`add_caller_note`), and the
editor writes it after the caller's words, once.

The caller's words are the newest user-role message that is neither guidance from the
observer layers nor a note written after them.
"""

from __future__ import annotations

from pipecat.frames.frames import (
    Frame,
    LLMContextFrame,
    LLMMessagesAppendFrame,
    LLMMessagesUpdateFrame,
    LLMSetToolChoiceFrame,
    LLMSetToolsFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext, LLMContextMessage

from processors.conversation.guidance_filter import is_guidance_message
from processors.emotion.steering import strip_voice_tag

# Metadata key on a caller turn's context frame: notes for the LLM about that turn.
CALLER_NOTES = "caller_notes"


def is_caller_turn(context: LLMContext) -> bool:
    """A context that ends with the caller's words: a turn the caller spoke, not the user
    aggregator's run for a turn that ended with nothing said (its prompt is a developer
    message)."""
    messages = context.get_messages()
    return bool(messages) and messages[-1].get("role") == "user"


def last_user_text(frame: LLMContextFrame) -> str:
    """The newest caller message in the LLM context, as plain text (the caller's words
    only: the voice note written after them is not theirs, and the observers' guidance
    lines, user-role too, are not the caller speaking)."""
    for message in reversed(frame.context.get_messages()):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(
                    part.get("text", "") for part in content if isinstance(part, dict))
            if not isinstance(content, str) or is_guidance_message(content):
                continue
            return strip_voice_tag(content)
    return ""


def guidance_message(text: str) -> LLMMessagesAppendFrame:
    """Guidance for the next LLM run, without starting one."""
    return LLMMessagesAppendFrame(messages=[{"role": "user", "content": text}], run_llm=False)


def add_caller_note(frame: LLMContextFrame, note: str) -> None:
    """A note about the caller's turn for the LLM (the emotion steering's `[VOICE: …]`),
    carried on the turn's frame to the one editor, which writes it after their words."""
    frame.metadata.setdefault(CALLER_NOTES, []).append(note)


def write_caller_notes(frame: LLMContextFrame) -> None:
    """The notes the turn's frame carries, written after the caller's words; taken off the
    frame, so a note is written once however often the frame is handled."""
    notes = frame.metadata.pop(CALLER_NOTES, None)
    if not notes or not is_caller_turn(frame.context):
        return
    message = frame.context.get_messages()[-1]
    if isinstance(message.get("content"), str):
        message["content"] = " ".join([message["content"], *notes])


def insert_before_caller(context: LLMContext, message: LLMContextMessage) -> None:
    """`message` just before the caller's words that end the context (what the audio
    check found, read beside what was transcribed)."""
    messages = context.get_messages()
    context.set_messages([*messages[:-1], message, messages[-1]])


def apply_context_frame(context: LLMContext, frame: Frame) -> bool:
    """A frame that edits the context (a Flows node's task messages and tools), applied
    as Pipecat's user aggregator would apply it; False: `frame` edits nothing. Whether
    the LLM then runs is the caller's to decide (`run_llm`)."""
    if isinstance(frame, LLMMessagesAppendFrame):
        context.add_messages(frame.messages)
    elif isinstance(frame, LLMMessagesUpdateFrame):
        context.set_messages(frame.messages)
    elif isinstance(frame, LLMSetToolsFrame):
        context.set_tools(frame.tools)
    elif isinstance(frame, LLMSetToolChoiceFrame):
        context.set_tool_choice(frame.tool_choice)
    else:
        return False
    return True
