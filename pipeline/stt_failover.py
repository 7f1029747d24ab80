"""The call's recognizer with an offline stand-in: Pipecat's `ServiceSwitcher` holds the
cloud recognizer and PocketSphinx, and moves to PocketSphinx the moment the cloud one
reports it can no longer work (its reconnect tries spent, or its key refused).

A switch is never silent: the caller hears that the line is hard to hear them on, is
asked to say it again (the words said during the outage went to the failed stream) and
is offered a call back; the record gets `stt_fallback`. The stand-in's decoders start
only when it takes over, so calls whose cloud recognizer never fails pay nothing for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from loguru import logger
from pipecat.pipeline.service_switcher import ServiceSwitcher, ServiceSwitcherStrategyFailover
from pipecat.services.stt_service import STTService

from lib.prompts import render_prompt
from services.pocketsphinx.stt import PocketSphinxSTTService
from services.provider_faults import FaultSink

HEARING_TROUBLE = "voice/hearing_trouble.txt"


def with_offline_standby(
    primary: STTService, keyterms: list[str], standby: STTService | None = None,
) -> ServiceSwitcher:
    """`primary` while it works, then `standby` (PocketSphinx with the call's keyterms)."""
    if standby is None:
        standby = PocketSphinxSTTService(keyterms=keyterms, prepare_at_start=False)
    return ServiceSwitcher(services=[primary, standby],
                           strategy_type=ServiceSwitcherStrategyFailover)


def announce_failover(
    switcher: ServiceSwitcher, *, faults: FaultSink, say: Callable[[str], Awaitable[None]],
) -> None:
    """When the switcher moves to the stand-in: record it, start its decoders, and tell
    the caller (`say` queues the line to be spoken)."""

    @switcher.strategy.event_handler("on_service_switched")
    async def _switched(_strategy, service) -> None:
        logger.warning(f"speech recognition moved to {service.name}")
        faults("stt_fallback", to=service.name)
        if isinstance(service, PocketSphinxSTTService):
            service.prepare()
        await say(render_prompt(HEARING_TROUBLE))
