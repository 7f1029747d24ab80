"""The practice system failing as the caller confirms a booking: the caller hears that the
booking system is not responding, that nothing was changed, and is offered a callback;
nothing is booked and the tool call is on record as a practice-system error.

No LLM: the deterministic navigator and the real tools over the embedded database; only
the practice system's booking fails.
"""



from services.practice.base import PMSError
from tests.flows.callers import PRIYA_PHONE, call_from
from tests.flows.test_engine import live_bookings, patient


class BookingDown:
    """The clinic's practice system: it still lists times, but a booking fails."""

    def __init__(self, practice) -> None:
        self._practice = practice
        self.name = "down"

    async def available_slots(self, *args, **kwargs):
        return await self._practice.available_slots(*args, **kwargs)

    async def book(self, *args, **kwargs):
        raise PMSError("503 Service Unavailable")


async def test_a_booking_the_practice_system_fails_is_said_so_and_nothing_is_booked(db, clinic):
    caller = await call_from(db, clinic, PRIYA_PHONE)
    await caller.says("Hi, I'd like to book a physio appointment")
    await caller.says("next week in the morning please")
    assert (await caller.says("the first one")).startswith("Just to confirm:")
    priya = (await patient(db, clinic, PRIYA_PHONE)).id
    before = await live_bookings(db, priya)
    caller.engine.tools.practice = BookingDown(caller.engine.tools.practice)

    heard = await caller.says("yes please")

    assert "booking system isn't responding" in heard and "haven't changed anything" in heard
    assert "call you back" in heard
    (booking,) = caller.tool_calls("CreateAppointment")
    assert booking.error_class == "pms"
    assert await live_bookings(db, priya) == before
