"""The pipeline diagram in docs/ARCHITECTURE.md is the one the factory builds today."""

from functools import cache

from pipeline.diagram import BEGIN, END, diagram
from tests.architecture.import_graph import ROOT

printed = cache(diagram)  # built once: each build assembles seven pipelines


def _documented() -> str:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert BEGIN in text and END in text, "docs/ARCHITECTURE.md lost its diagram markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block.startswith("```text\n") and block.endswith("\n```")
    return block.removeprefix("```text\n").removesuffix("\n```")


def test_the_documented_pipeline_is_the_one_the_factory_builds():
    assert _documented() == printed(), (
        "the pipeline the factory builds changed: paste `python -m pipeline.diagram` into "
        "docs/ARCHITECTURE.md between the pipeline-diagram markers")


def test_the_diagram_names_each_processor_with_its_file():
    lines = printed().splitlines()
    assert any("GraphNavigatorProcessor" in line
               and "flows/graph_navigator_processor.py" in line for line in lines)
    assert any("QuickObserverProcessor" in line
               and "processors/conversation/quick_observer_processor.py" in line for line in lines)
    assert any(line.startswith("observer, off the voice path: CallRecordObserver") for line in lines)
