"""A deployment's reach (texts, video rooms, deposit links) through the real adapters,
pointed at the simulator's stand-ins for Twilio, Daily and Stripe, all on this machine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import asyncpg

from flows.reach import Reach
from flows.texting import Texter
from services.payments import StripeLinks
from services.telehealth.daily import DailyRooms
from services.twilio.messages import TwilioMessages
from simulator.daily_api import FakeDaily, serve_daily
from simulator.stripe_api import FakeStripe, serve_stripe
from simulator.twilio_rest import FakeTwilioRest, serve_twilio_rest

PROVIDER_TIMEOUT_S = 1.0


@dataclass
class StandIns:
    twilio: FakeTwilioRest
    daily: FakeDaily
    stripe: FakeStripe
    reach: Reach


@asynccontextmanager
async def reach_through_stand_ins(pool: asyncpg.Pool, clinic_number: str
                                  ) -> AsyncIterator[StandIns]:
    """The three stand-ins served (the clinic's number owned at Twilio's), and the reach
    that uses them."""
    twilio, daily, stripe = FakeTwilioRest(), FakeDaily(), FakeStripe()
    twilio.add_number(clinic_number)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(serve_twilio_rest(twilio))
        daily_url = await stack.enter_async_context(serve_daily(daily))
        stripe_url = await stack.enter_async_context(serve_stripe(stripe))
        reach = Reach(
            texter=Texter(pool, TwilioMessages(twilio.account())),
            daily=DailyRooms(daily.api_key, base_url=daily_url, timeout_s=PROVIDER_TIMEOUT_S),
            payments=StripeLinks(stripe.api_key, api_base=stripe_url,
                                 timeout_s=PROVIDER_TIMEOUT_S))
        yield StandIns(twilio, daily, stripe, reach)
