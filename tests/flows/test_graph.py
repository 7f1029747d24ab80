"""Context graphs load from YAML only when they can run; errors name the offending state."""

import copy
import re

import pytest
import yaml

from flows.graph import GRAPHS_DIR, RETURN, GraphError, StateType, bundled_graph, parse_graph

CANONICAL_STATES = {
    "booking_discovery", "booking_existing_patient", "collecting_new_patient", "rescheduling",
    "cancelling", "answering_query", "handoff_prep", "verifying_identity", "init", "greeting",
    "discovering_service", "resolving_service", "resolving_location", "offering_slots",
    "awaiting_final_confirmation", "post_booking_closing", "loading_bookings", "picking_target",
    "confirming_cancel", "adjustment_rescheduling", "pricing", "service_info", "hours", "closing",
}
CANONICAL_SUPER_STATES = {"appointment_setting", "appointment_adjustment", "qa", "handoff"}


def tiny() -> dict:
    """The smallest runnable graph: greet, then say goodbye."""
    return {
        "id": "tiny", "version": 1, "description": "test", "initial_state": "hello",
        "phases": {"talk": "talking"},
        "actions": {"greet": {"description": "say hello"}, "bye": {"description": "say bye"}},
        "tools": {"Lookup": {"kind": "read", "description": "look"}},
        "states": {
            "hello": {
                "type": "action", "description": "greet", "actions": ["greet"],
                "exits": [{"name": "done", "to": "goodbye", "description": "finished"}],
            },
            "goodbye": {"type": "action", "description": "end", "actions": ["bye"]},
        },
    }


def rejected(data: dict) -> str:
    with pytest.raises(GraphError) as error:
        parse_graph(data, "tiny.yaml")
    return str(error.value)


def test_the_booking_graph_has_every_canonical_state_phase_and_action():
    graph = bundled_graph("clinic_booking")
    assert set(graph.states) == CANONICAL_STATES | OUR_STATES
    assert set(graph.super_states) == CANONICAL_SUPER_STATES | OUR_SUPER_STATES
    assert len(graph.states) + len(graph.super_states) == (
        28 + len(OUR_STATES) + len(OUR_SUPER_STATES))
    assert len(graph.phases) == 13
    seed_actions = [name for name in graph.actions if name not in OUR_ACTIONS]
    assert len(seed_actions) == 36
    assert graph.terminal_states == {"closing"}


OUR_STATES = {"confirming_attendance", "correcting_details", "crisis_support", "payment_status"}
OUR_SUPER_STATES = {"corrections"}
OUR_ACTIONS = {
    "greet", "ask_date_of_birth", "ask_preferred_time", "ask_service", "answer_pricing",
    "answer_service_info", "answer_hours", "close_call", "register_new_patient",
    "acknowledge_record_update", "confirm_new_patient_details", "ask_details_correction",
    "reask_shared_phone_dob", "offer_help_when_stuck", "ask_to_confirm_appointment",
    "mark_appointment_confirmed", "confirm_corrected_details", "correct_registered_details",
    "ask_caller_full_name", "look_up_caller_record", "crisis_support_first", "crisis_listen",
    "answer_payment_status", "put_through_to_person",
}


def test_booking_tools_are_gated_by_their_guards():
    tools = bundled_graph("clinic_booking").state_tools
    assert "CreatePatient" not in tools["booking_discovery"]
    assert "CreatePatient" in tools["collecting_new_patient"]
    assert {t for t in tools if "CreateAppointment" in tools[t]} == {"awaiting_final_confirmation"}
    assert "CheckAvailability" not in tools["offering_slots"]
    assert tools["closing"] == frozenset() and tools["greeting"] == frozenset()
    assert {t for t in tools if "CancelAppt" in tools[t]} == {"confirming_cancel"}
    # a state without its own list inherits its super-state's
    assert tools["service_info"] == {"GetServicesAndPricing", "GetAppointmentTypes",
                                     "GetLocationInfo", "CheckPaymentStatus"}
    # what may follow a booking, in the state a booking leads to; a deposit's state on a
    # later call too
    assert {"SendTextMessage", "GetTelehealthLink", "CreatePaymentLink",
            "CheckPaymentStatus"} <= tools["post_booking_closing"]
    assert {t for t in tools if "GetTelehealthLink" in tools[t]} == {"post_booking_closing"}
    assert "CheckPaymentStatus" in tools["payment_status"]


def test_every_bundled_graph_loads():
    for path in GRAPHS_DIR.glob("*.yaml"):
        assert bundled_graph(path.stem).id == path.stem


def test_a_tiny_graph_loads_and_knows_its_terminal_state():
    graph = parse_graph(tiny())
    assert graph.terminal_states == {"goodbye"}
    assert graph.states["hello"].type is StateType.ACTION


def test_an_exit_to_an_unknown_state_names_the_state_and_the_exit():
    data = tiny()
    data["states"]["hello"]["exits"][0]["to"] = "nowhere"
    message = rejected(data)
    assert "tiny.yaml" in message and "state 'hello'" in message and "'nowhere'" in message


def test_unknown_actions_phases_and_tools_are_named():
    data = tiny()
    data["states"]["hello"]["actions"] = ["sing"]
    data["states"]["hello"]["phases"] = ["dance"]
    data["states"]["hello"]["tools"] = ["Teleport"]
    message = rejected(data)
    assert "unknown action 'sing'" in message
    assert "unknown phase 'dance'" in message
    assert "'Teleport'" in message


def test_unreachable_states_are_rejected():
    data = tiny()
    data["states"]["island"] = {"type": "action", "description": "x", "actions": ["bye"]}
    assert "unreachable states: ['island']" in rejected(data)


def test_a_graph_without_a_terminal_state_is_rejected():
    data = tiny()
    data["states"]["goodbye"]["exits"] = [{"name": "again", "to": "hello", "description": "loop"}]
    assert "no terminal state" in rejected(data)


def test_state_types_need_what_they_run():
    data = tiny()
    data["states"]["hello"]["type"] = "tool_call"
    message = rejected(data)
    assert "states.hello" in message and "needs `tool`" in message


def test_a_child_may_narrow_but_never_widen_its_super_states_tools():
    data = tiny()
    data["tools"]["Write"] = {"kind": "write", "description": "write"}
    data["super_states"] = {"box": {"description": "b", "initial": "hello", "tools": ["Lookup"]}}
    data["states"]["hello"]["parent"] = "box"
    narrowed = copy.deepcopy(data)
    narrowed["states"]["hello"]["tools"] = []
    assert parse_graph(narrowed).state_tools["hello"] == frozenset()
    data["states"]["hello"]["tools"] = ["Lookup", "Write"]
    assert "tools ['Write'] are not in super-state 'box'" in rejected(data)


def test_only_side_loop_states_may_return():
    data = tiny()
    data["states"]["hello"]["exits"].append({"name": "back", "to": RETURN, "description": "b"})
    assert "returns but is not in a side-loop" in rejected(data)


def test_unreadable_yaml_is_a_clear_error(tmp_path):
    from flows.graph import load_graph

    path = tmp_path / "broken.yaml"
    path.write_text("states: [unclosed")
    with pytest.raises(GraphError, match="broken.yaml: cannot read graph"):
        load_graph(path)
    path.write_text(yaml.safe_dump({"id": "x"}))
    with pytest.raises(GraphError, match="broken.yaml: .*version: Field required"):
        load_graph(path)


def test_the_companion_graph_runs_on_the_same_engine():
    graph = bundled_graph("companion_checkin")
    assert graph.entry_state(graph.initial_state) == "remember"
    assert graph.entry_state("conversation") == "opening"
    assert graph.states["reminders_note"].type is StateType.ANNOTATION
    # the goodbye, and the ends of a call the clinic made that never got to the check-in
    assert graph.terminal_states == {"closing", "wrong_number_end", "not_available_end",
                                     "unconfirmed_end", "opted_out_end"}
    in_order = ("opening", "main", "winding_down", "closing")
    assert [phase for state in in_order for phase in graph.states[state].phases] == list(in_order)


def test_every_action_of_the_booking_graph_has_a_deterministic_way_to_be_chosen():
    graph = bundled_graph("clinic_booking")
    chosen_somewhere = set()
    for state in graph.states.values():
        unconditional = [a for a in state.actions if a not in state.action_when]
        chosen_somewhere |= set(state.action_when) | set(unconditional[:1])
    assert set(graph.actions) - chosen_somewhere == set()


def test_each_graph_says_what_happens_at_the_time_limit_and_clinic_calls_are_never_cut_off():
    assert bundled_graph("clinic_booking").time_limit == "escalate"
    assert bundled_graph("companion_checkin").time_limit == "end"
    assert parse_graph(tiny()).time_limit == "escalate"  # unsaid: a person takes over
    offered = {**tiny(), "time_limit": "offer_callback"}
    assert parse_graph(offered).time_limit == "offer_callback"


@pytest.mark.parametrize("policy", ["hang_up", "END", "", None, 720])
def test_an_unknown_time_limit_policy_is_refused_at_load(policy):
    error = rejected({**tiny(), "time_limit": policy})
    assert error.startswith("tiny.yaml: time_limit:")


# --- Graphs built from others ---------------------------------------------------------


def parts(**files: dict):
    def load(name: str) -> dict:
        return copy.deepcopy(files[name])
    return load


def test_an_included_graph_is_merged_by_name_and_the_including_file_wins():
    from flows.graph_compose import compose

    base = tiny()
    base["global_exits"] = [{"name": "bye", "to": "goodbye", "description": "base"}]
    data = {
        "include": ["tiny"], "id": "bigger",
        "actions": {"greet": {"description": "say hello warmly"}},
        "states": {"hello": {**base["states"]["hello"], "description": "warm hello"}},
        "global_exits": [{"name": "bye", "to": "goodbye", "description": "mine"},
                         {"name": "new", "to": "hello", "description": "added"}],
    }

    merged = parse_graph(compose(data, parts(tiny=base)))

    assert merged.id == "bigger" and merged.initial_state == "hello"
    assert merged.actions["greet"].description == "say hello warmly"
    assert merged.actions["bye"].description == "say bye"  # kept from the include
    assert merged.states["hello"].description == "warm hello"
    assert [(e.name, e.description) for e in merged.global_exits] == [
        ("bye", "mine"), ("new", "added")]


def test_omit_drops_included_states_and_guard_all_guards_every_other_tool_and_state():
    from flows.graph_compose import compose

    base = tiny()
    base["states"]["spare"] = {"type": "action", "description": "x", "actions": ["bye"]}
    base["tools"]["Open"] = {"kind": "read", "description": "open"}
    data = {"include": ["tiny"], "omit": ["spare"],
            "guard_all": {"guard": "identified_patient", "except_states": ["hello"],
                          "except_tools": ["Open"]}}

    merged = parse_graph(compose(data, parts(tiny=base)))

    assert "spare" not in merged.states
    assert merged.tools["Lookup"].guards == ["identified_patient"]
    assert merged.tools["Open"].guards == []
    assert merged.states["goodbye"].requires == ["identified_patient"]
    assert merged.states["hello"].requires == []


@pytest.mark.parametrize(("data", "files", "message"), [
    ({"include": ["a"]}, {"a": {"include": ["a"]}}, "include cycle: a -> a"),
    ({"include": ["tiny"], "omit": ["nowhere"]}, {"tiny": tiny()}, "'nowhere' is not a state"),
    ({"include": ["tiny"], "guard_all": {"guard": "g", "except_states": ["nowhere"]}},
     {"tiny": tiny()}, "['nowhere'] are not states or tools"),
])
def test_includes_that_cannot_be_resolved_are_refused_by_name(data, files, message):
    from flows.graph_compose import CompositionError, compose

    with pytest.raises(CompositionError, match=re.escape(message)):
        compose(data, parts(**files))


def test_an_unknown_bundled_include_names_the_file():
    assert "cannot read included 'parts/nothing'" in rejected({"include": ["parts/nothing"]})


def test_the_outbound_graphs_reuse_the_booking_graph_behind_the_right_person_check():
    booking = bundled_graph("clinic_booking")
    for graph_id in ("outbound_callback", "waitlist_offer", "appointment_reminder"):
        graph = bundled_graph(graph_id)
        assert graph.entry_state(graph.initial_state) == "outbound_start"
        assert graph.states["outbound_start"].exits[0].to == "checking_person"
        assert {"init", "greeting"}.isdisjoint(graph.states)
        assert set(booking.states) - {"init", "greeting"} <= set(graph.states)
        # nothing about care before the check: every tool but these needs it, every state
        # but these requires it
        open_tools = {t for t, spec in graph.tools.items()
                      if "right_person_confirmed" not in spec.guards}
        assert open_tools == {"SetDoNotCall", "EscalateToHuman", "TransferCall"}, graph_id
        open_states = {s for s, r in graph.state_requires.items()
                       if "right_person_confirmed" not in r}
        assert open_states == {
            "outbound_start", "checking_person", "opting_out", "opted_out_end",
            "wrong_number_end", "not_available_end", "unconfirmed_end", "handoff_prep",
            "crisis_support", "closing"}, graph_id
        assert graph.global_exits[-1].name == "opted_out" and graph.global_exits[-1].first


def test_only_graphs_with_the_right_person_check_may_carry_outbound_calls():
    from call.outbound_call import OUTBOUND_GRAPHS
    from flows.catalog import outbound_problems

    for graph_id in set(OUTBOUND_GRAPHS.values()):
        assert outbound_problems(bundled_graph(graph_id)) == [], graph_id
    assert "no state 'checking_person'" in outbound_problems(bundled_graph("clinic_booking"))
