"""What every settings group shares: how its fields are filled, and the list type."""

from __future__ import annotations

import json
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic_settings import NoDecode


class SettingsGroup(BaseModel):
    """One component's settings, filled by their flat names or their field names.

    A field's environment variable is its validation alias upper-cased, or its name when
    it has none. A field whose name would repeat its group's drops that part
    (`safety.escalate_similarity`) and keeps the flat name as its alias
    (`SAFETY_ESCALATE_SIMILARITY`).
    """

    model_config = ConfigDict(
        extra="forbid", validate_default=True, validate_by_name=True, validate_by_alias=True
    )


def _split_list(value: object) -> object:
    """A JSON list, or a comma-separated string (blank items dropped), as a list."""
    if isinstance(value, str):
        if value.strip().startswith("["):
            return json.loads(value)
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


Item = TypeVar("Item")
# A list given as a comma-separated string or as a JSON list (in the environment or in code).
CommaList = Annotated[list[Item], NoDecode, BeforeValidator(_split_list)]
