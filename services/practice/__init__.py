"""The practice system a deployment uses (`PMS_PROVIDER`), chosen once at start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg

from services.practice.base import (
    BookingMade,
    BookingOutcome,
    PMSError,
    PMSRefused,
    PracticeSystem,
    SlotConflict,
    SyncOutcome,
    TakenThere,
)
from services.practice.builtin import BuiltinPractice

if TYPE_CHECKING:
    from config import Settings
    from services.cliniko.practice import ClinikoPractice

__all__ = ["BookingMade", "BookingOutcome", "BuiltinPractice", "ClinikoPractice", "PMSError",
           "PMSRefused", "PracticeSystem", "SlotConflict", "SyncOutcome", "TakenThere",
           "build_practice"]


def __getattr__(name: str) -> Any:
    """`ClinikoPractice` is imported when first asked for: the adapter imports this
    package's base, so importing it here up front would make the two import each other."""
    if name == "ClinikoPractice":
        from services.cliniko.practice import ClinikoPractice

        return ClinikoPractice
    raise AttributeError(name)


def build_practice(settings: Settings, pool: asyncpg.Pool) -> PracticeSystem:
    """The world model itself, or Cliniko with the configured key (a bad key's shard
    raises ValueError here, at start, rather than on the first call)."""
    providers = settings.providers
    if providers.pms == "cliniko":
        from services.cliniko.practice import ClinikoPractice

        if providers.cliniko_api_key is None:
            raise ValueError("PMS_PROVIDER=cliniko needs CLINIKO_API_KEY")
        return ClinikoPractice(
            pool, api_key=providers.cliniko_api_key.get_secret_value(),
            user_agent=providers.cliniko_user_agent, base_url=providers.cliniko_base_url,
            booking_wait_s=providers.cliniko_booking_wait_s,
        )
    return BuiltinPractice(pool)
