"""One editor of the LLM context: Pipecat's aggregators write the conversation, and of
ours only `processors/llm_context.py` writes to it, called by the one processor that
stands at the LLM's door for a turn (the graph navigator, or without a graph the
caller-notes processor). Other layers attach notes to the turn's frame instead."""

import ast

from tests.architecture.import_graph import project_modules

EDITOR = "processors.llm_context"
WRITES = {"set_messages", "add_message", "add_messages", "set_tools", "set_tool_choice",
          "transform_messages"}
EDITING_FUNCTIONS = {"write_caller_notes", "insert_before_caller", "apply_context_frame"}
EDITING_PROCESSORS = {"flows.graph_navigator_processor",
                      "processors.conversation.caller_notes_processor"}


def _tree(module: str) -> ast.AST:
    return ast.parse(project_modules()[module].read_text())


def test_only_the_context_module_writes_to_an_llm_context():
    writers = set()
    for module in project_modules():
        for node in ast.walk(_tree(module)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WRITES):
                writers.add(module)
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                    and t.slice.value == "content" for t in node.targets):
                writers.add(module)  # a message's words changed in place
    assert writers == {EDITOR}


def test_only_the_processor_at_the_llms_door_calls_the_editor():
    callers = set()
    for module in project_modules():
        for node in ast.walk(_tree(module)):
            if (isinstance(node, ast.ImportFrom) and node.module == EDITOR
                    and {alias.name for alias in node.names} & EDITING_FUNCTIONS):
                callers.add(module)
    assert callers == EDITING_PROCESSORS
