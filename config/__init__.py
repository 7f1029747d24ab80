"""One settings object for the whole service, read from the environment and `.env`.

Every component reads its configuration from here; nothing else parses env vars. The
settings come in one group per component (`settings.safety.escalate_similarity`); the
environment names stay flat (`SAFETY_ESCALATE_SIMILARITY`), and `Settings(...)` takes
them as keywords too (config/flat_names.py). The groups: `service.py` (server, storage,
ops, telephony), `providers.py` (which engine or vendor does each job, with their keys),
`features.py` (call, turns, conversation, safety, emotion, world), `memory.py` (memory
across calls), `outbound.py`
(the outbound dispatcher). Which provider each
component uses is decided from these settings in pipeline/provider_choice.py.
"""

from config.features import (
    DEFAULT_SYSTEM_KEYTERMS,
    CallSettings,
    ConversationSettings,
    CrisisResource,
    EmotionSettings,
    SafetySettings,
    TurnSettings,
    WorldSettings,
)
from config.flat_names import flat_names
from config.group import CommaList, SettingsGroup
from config.memory import MemorySettings
from config.outbound import OutboundSettings
from config.providers import ProviderSettings
from config.service import OpsSettings, ServerSettings, StorageSettings, TelephonySettings
from config.settings import Settings, get_settings, setting_name

__all__ = [
    "DEFAULT_SYSTEM_KEYTERMS",
    "CallSettings",
    "CommaList",
    "ConversationSettings",
    "CrisisResource",
    "EmotionSettings",
    "MemorySettings",
    "OpsSettings",
    "OutboundSettings",
    "ProviderSettings",
    "SafetySettings",
    "ServerSettings",
    "Settings",
    "SettingsGroup",
    "StorageSettings",
    "TelephonySettings",
    "TurnSettings",
    "WorldSettings",
    "flat_names",
    "get_settings",
    "setting_name",
]
