"""Reading and adding to the LLM context, shared by the processors around it.

The caller's words are the newest user-role message that is neither guidance from the
observer layers nor the emotion tag the steering adds; a context that ends with them is a
caller turn (not a Flows task or a tool result).
"""

from __future__ import annotations

from pipecat.frames.frames import LLMContextFrame, LLMMessagesAppendFrame
from pipecat.processors.aggregators.llm_context import LLMContext

from processors.conversation.guidance_filter import is_guidance_message
from processors.emotion.steering import strip_voice_tag


def is_caller_turn(context: LLMContext) -> bool:
    """A context that ends with the caller's words (not a Flows task or a tool result)."""
    messages = context.get_messages()
    return bool(messages) and messages[-1].get("role") == "user"


def last_user_text(frame: LLMContextFrame) -> str:
    """The newest caller message in the LLM context, as plain text (the caller's words
    only: the emotion tag the steering adds for the LLM is not theirs, and the observers'
    guidance lines, user-role too, are not the caller speaking)."""
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
