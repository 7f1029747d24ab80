"""One writer per piece of a call's shared state: the call session's fate (why it ends,
where it is put through) and what the conversation layers share. Any other module asks
the owner through a method, so the order of who changed what is visible in one place."""

import ast
import dataclasses
import re
from functools import lru_cache

from call.call_session import CallSession
from call.conversation import ConversationState
from tests.architecture.import_graph import project_modules

OWNERS = {CallSession: "call.call_session", ConversationState: "call.conversation"}
# How other modules name a call's session or its conversation state.
HOLDER = re.compile(r"(^|\.)_?(session|conversation)$")


@lru_cache(maxsize=1)
def _stores() -> list[tuple[str, str, str]]:
    """Every attribute assignment in the project, as (module, attribute, holder): the
    source is read once and every field is looked up in it."""
    found = []
    for module, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                       else [])
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                        found.append((module, part.attr, ast.unparse(part.value)))
    return found


def _writers(field: str, owner_module: str) -> set[str]:
    return {module for module, attr, holder in _stores() if attr == field
            and (HOLDER.search(holder) or (holder == "self" and module == owner_module))}


def test_each_field_of_the_shared_call_state_has_one_writer():
    shared = {}
    for cls, module in OWNERS.items():
        for field in dataclasses.fields(cls):
            writers = _writers(field.name, module)
            if len(writers) > 1:
                shared[f"{cls.__name__}.{field.name}"] = sorted(writers)
    assert shared == {}


def test_the_call_s_fate_is_written_by_the_session_alone():
    for field in ("completion_reason", "transfer_to", "caller_hung_up", "bad_messages"):
        assert _writers(field, "call.call_session") == {"call.call_session"}, field
    for field in ("suspended", "escalated_on", "interrupted_reply"):
        assert _writers(field, "call.conversation") == {"call.conversation"}, field
