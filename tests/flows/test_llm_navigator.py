"""The LLM navigator survives bad model output, keeps the first filler, never gets stuck."""

import json
from datetime import date

import pytest

from call.call_session import CallLog
from call.identity import CallIdentity
from db.scheduling import Patient
from flows.graph import bundled_graph
from flows.graph_session import GraphSession
from flows.guards import check
from flows.llm_navigator import LLMNavigator, parse_choice
from processors.emotion.fillers import filler_guidance
from processors.emotion.state import EmotionalState
from services.emotion.reading import EmotionReading, Source
from tests.fakes import CollectingWriter, ScriptedModel, choice

GRAPH = bundled_graph("clinic_booking")
TODAY = date(2026, 11, 24)
PRIYA = Patient("p-priya", "Priya", "Nair", date(1985, 9, 30), "+15550100204")


def navigator(model: ScriptedModel, writer: CollectingWriter | None = None) -> LLMNavigator:
    return LLMNavigator(GRAPH, model, CallLog("c", writer or CollectingWriter()),
                        clinic_name="Demo Family Clinic", timeout_s=0.2)


def session() -> GraphSession:
    return GraphSession(identity=CallIdentity("c", "w", "s"),  patient=PRIYA,
                          phone_matches=[PRIYA], upcoming=[], services_read=True)


def test_answers_in_code_fences_parse_and_junk_does_not():
    assert parse_choice('```json\n{"choice": "ask_service"}\n```').choice == "ask_service"
    with pytest.raises(ValueError):
        parse_choice("I think the caller wants to book")


async def test_invalid_json_then_a_valid_choice_is_retried_and_the_first_filler_wins():
    writer = CollectingWriter()
    model = ScriptedModel(
        "not json at all", json.dumps({"choice": "teleport", "filler": "One moment."}),
        choice("ask_how_can_help", filler="Sure, let me see."),
    )
    decision = await navigator(model, writer).navigate(session(), "booking_discovery", "hmm", TODAY)
    assert decision.action == "ask_how_can_help" and decision.state == "booking_discovery"
    assert decision.filler == "One moment."  # from the second, invalid, attempt: first wins
    assert len(model.prompts) == 3
    assert [e.data["attempt"] for e in writer.events("navigator_retry")] == [1, 2]


async def test_after_three_failures_the_first_valid_option_is_taken():
    writer = CollectingWriter()
    model = ScriptedModel(RuntimeError("503"), "hang", "{}")
    decision = await navigator(model, writer).navigate(session(), "booking_discovery", "hmm", TODAY)
    assert decision.action == GRAPH.states["booking_discovery"].actions[0]
    assert writer.events("navigator_fallback")[0].data["state"] == "booking_discovery"


async def test_exits_are_walked_through_several_states_until_an_action():
    model = ScriptedModel(
        choice("caller_spoke", filler="Hi!"),  # greeting → booking_discovery
        choice("book_new"),                    # → appointment_setting → resolving_service
        choice("ask_service", verify=True),
    )
    call = session()
    decision = await navigator(model).navigate(call, "greeting", "I'd like to book", TODAY)
    assert [h.next for h in decision.hops] == ["booking_discovery", "resolving_service"]
    assert (decision.state, decision.action) == ("resolving_service", "ask_service")
    assert decision.filler == "Hi!" and decision.verify_audio
    assert call.last_action == "ask_service"
    # every prompt lists only the options of its own state
    assert "book_new" in model.prompts[1] and "ask_service" not in model.prompts[1]


async def test_the_model_chooses_where_to_go_but_not_what_the_caller_confirmed():
    call = session()
    call.offer([])
    call.last_action = "final_slot_confirmation"
    call.picked_slot = None  # nothing was read back
    model = ScriptedModel(choice("book_confirmed_selected_slot"))
    decision = await navigator(model).navigate(
        call, "awaiting_final_confirmation", "yes book it", TODAY
    )
    assert decision.action == "book_confirmed_selected_slot"
    assert call.confirmation is None
    refused = check(GRAPH, decision.state, "CreateAppointment", call, {"slot_ref": "S1"})
    assert refused is not None  # a premature booking is blocked, whatever the model chose


async def test_the_first_filler_is_said_at_once_while_the_model_is_asked_again():
    happened: list[str] = []

    class RecordingModel(ScriptedModel):
        async def __call__(self, prompt: str) -> str:
            happened.append("asked the model")
            return await super().__call__(prompt)

    async def say(text: str) -> None:
        happened.append(f"said {text!r}")

    model = RecordingModel(
        json.dumps({"choice": "teleport", "filler": "One moment."}),
        choice("ask_how_can_help", filler="Sure, let me see."),
    )
    decision = await navigator(model).navigate(
        session(), "booking_discovery", "hmm", TODAY, filler=say
    )
    assert happened == ["asked the model", "said 'One moment.'", "asked the model"]
    assert decision.filler == "One moment." and decision.filler_said


async def test_after_a_tool_call_state_the_model_picks_its_exit():
    call = session()
    model = ScriptedModel(choice("none"), choice("ask_how_can_help"))
    decision = await navigator(model).navigate(call, "loading_bookings", "cancel it", TODAY)
    assert decision.pending_tool == "GetCurrentlyBookedAppts" and not model.prompts
    resumed = await navigator(model).resume(call, decision.state, decision.turn)
    assert [h.next for h in resumed.hops] == ["booking_discovery"]
    assert (resumed.state, resumed.action) == ("booking_discovery", "ask_how_can_help")


@pytest.mark.parametrize(("heard", "wanted"), [
    (None, "plain and friendly"),
    ("Anxiety", "gentle and reassuring"),
    ("Anger", "leave it empty"),
])
async def test_the_model_is_told_how_the_filler_should_sound_for_this_caller(heard, wanted):
    state = EmotionalState(clock=lambda: 10.0)
    for at in (8.0, 9.0) if heard else ():
        state.add(EmotionReading(Source.PROSODY, {heard: 0.8}, at))
    model = ScriptedModel(choice("ask_how_can_help", filler="Of course."))
    guided = LLMNavigator(GRAPH, model, CallLog("c", CollectingWriter()),
                          clinic_name="Demo Family Clinic",
                          filler_guidance=lambda: filler_guidance(state.snapshot()))
    await guided.navigate(session(), "booking_discovery", "hmm", TODAY)
    assert wanted in model.prompts[0]
