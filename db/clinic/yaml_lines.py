"""Read YAML (or JSON) text into plain data, remembering the line of every key and list
item, so a problem found later in the data can name its line.

Read safely: no Python objects, and no anchors or aliases (a few lines of aliases can
expand to gigabytes). Two YAML 1.1 surprises are read the way a person means them:
9:00 stays the text "9:00" (not 540) and +15550100100 stays a phone number (not an
integer without its plus).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from db.clinic.problems import Path, Problem, render_path, short


class _Loader(yaml.SafeLoader):
    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        raw = str(node.value)
        if ":" in raw or raw.startswith("+"):
            return raw
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


@dataclass
class ReadText:
    data: Any = None
    lines: dict[Path, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def read_text(text: str) -> ReadText:
    """The data, the line of each path in it, and the problems that stop reading."""
    read = ReadText()
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as error:  # a character YAML never allows, seen up front
        line = text.count("\n", 0, error.position) + 1
        read.problems.append(Problem("", line, f"not valid YAML: the character "
                                               f"U+{error.character:04X} is not allowed"))
        return read
    try:
        node = loader.get_single_node()
        if node is None:
            read.problems.append(Problem("", 1, "the file is empty: it starts with `version: 1`"))
            return read
        _index(node, (), read, set())
        if read.problems:
            return read
        read.data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        reason = " ".join(part for part in (error.context, error.problem) if part)
        read.problems.append(Problem("", mark.line + 1 if mark else None,
                                     f"not valid YAML: {reason}"))
    except yaml.YAMLError as error:
        read.problems.append(Problem("", None, f"not valid YAML: {short(str(error), 120)}"))
    finally:
        loader.dispose()
    return read


def _index(node: yaml.Node, path: Path, read: ReadText, seen: set[int]) -> None:
    """Record the line of every key and item under `node`; refuse repeated (aliased) nodes
    and keys given twice in one mapping."""
    if id(node) in seen:
        read.problems.append(Problem(render_path(path),
                                     read.lines.get(path, node.start_mark.line + 1),
                                     "anchors and aliases (&name, *name) are not supported: "
                                     "write the value out"))
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            name = str(key.value)
            line = key.start_mark.line + 1
            if name in first:
                read.problems.append(Problem(render_path((*path, name)), line,
                                             f"'{name}' is given twice (also line {first[name]})"))
                continue
            first[name] = line
            read.lines[(*path, name)] = line
            _index(value, (*path, name), read, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            read.lines[(*path, index)] = item.start_mark.line + 1
            _index(item, (*path, index), read, seen)
