"""A fast model's JSON answer, validated: one reading for every side call.

Providers are asked for JSON held to a schema, but an answer may still come wrapped in
a code fence, be cut off, or miss a field. The error names what did not fit and never
quotes the answer: a model may echo the caller's words, and the reason reaches logs.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

Answer = TypeVar("Answer", bound=BaseModel)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_answer(raw: str, model: type[Answer], what: str) -> Answer:
    """`raw` as `model` (code fences tolerated); ValueError("<what>: <reason>") otherwise."""
    try:
        return model.model_validate(json.loads(_FENCE.sub("", raw.strip())))
    except json.JSONDecodeError as error:
        reason = f"not JSON ({error.msg}, {len(raw)} chars)"
    except ValidationError as error:
        reason = "; ".join(
            f"{'.'.join(map(str, item['loc'])) or 'answer'}: {item['msg']}"
            for item in error.errors(include_url=False, include_input=False)
        )
    raise ValueError(f"{what}: {reason[:200]}")
