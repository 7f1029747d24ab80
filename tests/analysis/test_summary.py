"""A finished call's summary by rules: what the caller wanted, what was done, what is left
for a person and the concerns raised, each pointing at its turns."""

from analysis.quality import score_call
from analysis.summary import summarise
from db.call_analyses import RecordedHop, RecordedTool
from tests.analysis.records import booked, conversation, record


def test_a_booking_call_says_what_was_wanted_and_what_was_booked():
    turns = conversation(
        "agent: Thanks for calling. How can I help?",
        "caller: hiya, I'd like to get an appointment for my shoulder physio",
        "agent: I have Tuesday at 10 AM. Shall I book it?",
        "caller: yes please go ahead",
        "agent: Booked.")
    summary = summarise(record(turns, writes=[booked(3)]))

    assert [w.text for w in summary.wanted] == ["Book an appointment"]
    assert summary.wanted[0].turns == (1,)
    assert summary.done[0].kind == "booked"
    assert summary.done[0].text.startswith("Booked: Physiotherapy")
    assert summary.done[0].turns == (3,)
    assert summary.done[0].recap == ("booked Physiotherapy with Dr Okafor at Harbour, "
                                     "Tuesday 1 December at 10 AM")
    assert summary.left_for_person == () and summary.unresolved == ()


def test_a_cancellation_that_never_happened_is_left_for_a_person():
    turns = conversation(
        "agent: How can I help?",
        "caller: I need to call off my appointment on Friday",
        "agent: I couldn't find that appointment.",
        "caller: ok never mind bye")
    summary = summarise(record(turns))

    assert [u.text for u in summary.unresolved] == ["Cancel an appointment"]
    assert summary.left_for_person[0].text == "Not done: cancel an appointment"
    assert summary.left_for_person[0].turns == (1,)
    assert summary.recaps() == ["called to cancel an appointment"]


def test_a_request_handed_to_the_team_is_done_as_a_call_back_and_left_for_a_person():
    turns = conversation(
        "agent: How can I help?",
        "caller: could somebody ring me back about my bill",
        "agent: Someone from the team will call you back tomorrow morning.")
    summary = summarise(record(turns, events=[("call_back_promised", {}, 5300)]))

    assert summary.done[0].kind == "callback"
    assert summary.done[0].turns == (2,)
    assert "Call the caller back" in [item.text for item in summary.left_for_person]
    assert summary.unresolved == ()


def test_concerns_come_from_the_callers_words_and_the_safety_monitor():
    turns = conversation(
        "agent: How can I help?",
        "caller: my knee has been really swollen since Monday",
        "agent: I'm sorry to hear that.",
        "caller: honestly you are not listening to me",
        "caller: I've got crushing chest pain right now")
    summary = summarise(record(turns, escalations=[
        {"seq": 0, "concept": "chest_pain", "severity": "hard", "status": "open",
         "at_ms": 10500}]))

    kinds = [(c.kind, c.turns) for c in summary.concerns]
    assert ("health", (1,)) in kinds
    assert ("dissatisfaction", (3,)) in kinds
    assert ("safety", (4,)) in kinds
    assert any(c.text.startswith("Red flag") and c.turns == (4,) for c in summary.concerns)
    assert "An escalation is still open" in [item.text for item in summary.left_for_person]


def test_a_question_answered_is_done_without_any_write():
    turns = conversation(
        "agent: How can I help?",
        "caller: what time do you close on saturdays",
        "agent: We close at 1 PM on Saturdays.")
    summary = summarise(record(turns))

    assert [w.recap for w in summary.wanted] == ["asked about our opening hours"]
    assert summary.unresolved == () and summary.left_for_person == ()


def test_what_the_context_graph_understood_counts_as_wanted_too():
    turns = conversation(
        "agent: How can I help?",
        "caller: I need a checkup tomorrow morning",  # no booking words: the engine read it
        "agent: I have 9 AM or 10 AM.")
    call = record(turns)
    call.hops.append(RecordedHop("book_new", "appointment_setting", 3000))
    call.hops.append(RecordedHop("caller_spoke", "booking_discovery", 2700))

    [wanted] = summarise(call).wanted
    assert (wanted.text, wanted.turns, wanted.task) == ("Book an appointment", (1,), "book")


def test_a_request_said_before_a_red_flag_is_still_what_the_caller_wanted():
    turns = conversation(
        "agent: How can I help?",
        "caller: I was hoping to book a follow up, but I've got chest pain and can't breathe",
        "agent: Please hang up and call 911 now. I've asked the team to call you back.")
    summary = summarise(record(turns, events=[("call_back_promised", {}, 5300)]))

    assert [w.text for w in summary.wanted] == ["Book an appointment"]
    assert summary.unresolved == ()  # handed to the team with the red flag
    assert [c.kind for c in summary.concerns] == ["health"]
    assert summary.concerns[0].text.startswith("Red flag (chest pain)")


def test_a_request_logged_for_the_team_is_done_and_left_for_a_person():
    turns = conversation(
        "agent: How can I help?",
        "caller: can I speak to somebody in billing please",
        "agent: I've logged your request; the team will get back to you.")
    summary = summarise(record(turns, tools=[RecordedTool("EscalateToHuman", True, None, 2700)]))

    assert [(d.kind, d.task, d.turns) for d in summary.done] == [("callback", "person", (1,))]
    assert summary.unresolved == ()
    assert [i.text for i in summary.left_for_person] == [
        "Get back to the caller about their request (callback queue)"]


def test_where_the_graph_ran_a_question_about_an_appointment_is_not_read_as_booking():
    turns = conversation(
        "agent: How can I help?",
        "caller: what appointments have I got coming up, I can never remember",
        "agent: You have a follow-up visit on Monday at 9 AM.")
    call = record(turns)
    call.hops.append(RecordedHop("query", "answering_query", 2700))

    summary = summarise(call)
    assert [(w.text, w.task) for w in summary.wanted] == [("Check their appointments", "query")]
    assert summary.unresolved == ()


def test_a_request_the_agent_misread_is_not_what_the_caller_wanted():
    turns = conversation(
        "agent: How can I help?",
        "caller: I've lost my card, could you tell me when my appointment is",
        "agent: What's the visit about?",
        "caller: like I said I want to know what I've got coming up",
        "agent: You have a follow-up visit on Monday at 10 AM.")
    call = record(turns)
    call.hops.extend([RecordedHop("book_new", "resolving_service", 2700),
                      RecordedHop("new_request", "booking_discovery", 7900),
                      RecordedHop("query", "answering_query", 8000)])

    summary = summarise(call)
    assert [w.text for w in summary.wanted] == ["Check their appointments"]
    assert summary.unresolved == ()
    flow = score_call(call, summary).dimensions["conversation_flow"]
    assert flow.score == 4 and "had to say again" in flow.reason and flow.turns == (3,)
