"""The settings' flat environment names, and the source that files them into groups.

Settings are read in groups (`settings.safety.escalate_similarity`) while the
environment, `.env` and keyword arguments keep the flat names they always had
(`SAFETY_ESCALATE_SIMILARITY`, `Settings(safety_escalate_similarity=0.9)`).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource


@cache
def flat_names(settings_cls: type[BaseModel]) -> dict[str, tuple[str, str]]:
    """Every setting's flat name (lower case) → its group and its field in the group."""
    names: dict[str, tuple[str, str]] = {}
    for group, slot in settings_cls.model_fields.items():
        for name, field in slot.annotation.model_fields.items():
            alias = field.validation_alias
            names[alias if isinstance(alias, str) else name] = (group, name)
    return names


@cache
def _flat_model(settings_cls: type[BaseModel]) -> type[BaseModel]:
    """Every setting at the top level under its flat name: what the environment, `.env`
    and secret-file sources look up and decode (they never validate it)."""
    fields: dict[str, Any] = {}
    for name, (group, field_name) in flat_names(settings_cls).items():
        field = settings_cls.model_fields[group].annotation.model_fields[field_name]
        annotation = field.annotation
        if field.metadata:  # keeps NoDecode, so a comma-separated variable is not JSON-decoded
            annotation = Annotated[(annotation, *field.metadata)]
        fields[name] = (annotation, None)
    return create_model(f"Flat{settings_cls.__name__}", **fields)


class FlatNamesSource(PydanticBaseSettingsSource):
    """A settings source read by the flat names, its values filed into their groups.

    Keyword arguments pass through as given, and only they may also give a whole group;
    the environment, `.env` and secret-file sources look the flat names up. Names that
    are not settings are dropped, as before.
    """

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._keywords = isinstance(source, InitSettingsSource)
        if not self._keywords:
            source.settings_cls = _flat_model(settings_cls)  # the fields it looks up
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the wrapped source

    def __call__(self) -> dict[str, Any]:
        names = flat_names(self.settings_cls)
        grouped: dict[str, Any] = {}
        filed: dict[str, dict[str, Any]] = {}
        for key, value in self._source().items():
            name = key.lower()
            if name in names:
                filed.setdefault(names[name][0], {})[name] = value
            elif self._keywords and name in self.settings_cls.model_fields:
                grouped[name] = value
        for group, values in filed.items():
            whole = grouped.get(group, {})
            if isinstance(whole, BaseModel):
                whole = whole.model_dump()
            grouped[group] = {**whole, **values}
        return grouped
