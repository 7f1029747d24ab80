"""The settings object: one group per component, read from the environment and `.env`."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from config.features import (
    CallSettings,
    ConversationSettings,
    EmotionSettings,
    SafetySettings,
    TurnSettings,
    WorldSettings,
)
from config.flat_names import FlatNamesSource
from config.memory import MemorySettings
from config.outbound import OutboundSettings
from config.providers import ProviderSettings
from config.reach import ReachSettings
from config.service import OpsSettings, ServerSettings, StorageSettings, TelephonySettings


class Settings(BaseSettings):
    """Service configuration, one group per component; the environment names are flat."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", validate_default=True
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    ops: OpsSettings = Field(default_factory=OpsSettings)
    telephony: TelephonySettings = Field(default_factory=TelephonySettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    call: CallSettings = Field(default_factory=CallSettings)
    turns: TurnSettings = Field(default_factory=TurnSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    safety: SafetySettings = Field(default_factory=SafetySettings)
    emotion: EmotionSettings = Field(default_factory=EmotionSettings)
    world: WorldSettings = Field(default_factory=WorldSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    outbound: OutboundSettings = Field(default_factory=OutboundSettings)
    reach: ReachSettings = Field(default_factory=ReachSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources in the usual order, each read by the flat names."""
        return tuple(
            FlatNamesSource(settings_cls, source)
            for source in (init_settings, env_settings, dotenv_settings, file_secret_settings)
        )


def setting_name(loc: tuple[int | str, ...]) -> str:
    """A validation error's place as the environment names it (`SAFETY_ESCALATE_SIMILARITY`,
    `CRISIS_RESOURCES.0.PHONE`): the group is left out."""
    parts = loc[1:] if loc and loc[0] in Settings.model_fields else loc
    return ".".join(str(part) for part in parts).upper()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (tests build their own `Settings` instead)."""
    return Settings()
