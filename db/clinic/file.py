"""The clinic file: read it (YAML or JSON text, or data already parsed), check it, write
it back.

Reading reports every problem at once, each with its line and a plain reason, and
raises `ClinicFileInvalid`; a file that reads is valid on its own (what only the
database can see, such as a number another clinic owns, is checked on import).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from db.clinic.checks import check_sections
from db.clinic.dump import dump_clinic_yaml
from db.clinic.field_errors import field_errors
from db.clinic.model import ClinicFile
from db.clinic.problems import ClinicFileInvalid, Path, Problem, bounded, render_path
from db.clinic.sections import Sections
from db.clinic.yaml_lines import read_text

__all__ = ["ClinicFile", "ClinicFileInvalid", "Problem", "dump_clinic_yaml",
           "parse_clinic_data", "parse_clinic_text"]

MAX_TEXT_CHARS = 2_000_000


def parse_clinic_text(text: str, source: str = "") -> ClinicFile:
    """A clinic read from YAML or JSON text (`source` names it in logs only); raises
    ClinicFileInvalid listing every problem with its line."""
    if len(text) > MAX_TEXT_CHARS:
        raise ClinicFileInvalid([Problem("", None, f"the file is too large (more than "
                                                   f"{MAX_TEXT_CHARS:,} characters)")])
    if text.lstrip().startswith(("{", "[")):
        # JSON: a raw tab can only be whitespace between tokens, which YAML refuses
        text = text.replace("\t", " ")
    read = read_text(text)
    if read.problems:
        raise ClinicFileInvalid(bounded(read.problems))
    return _validated(read.data, read.lines)


def parse_clinic_data(data: Any) -> ClinicFile:
    """A clinic from data already parsed (e.g. a JSON request body): the same checks,
    problems without lines."""
    return _validated(data, None)


def _validated(data: Any, lines: dict[Path, int] | None) -> ClinicFile:
    """`lines`: where each path is in the text read (None: no text, no lines)."""
    def line_of(path: Path) -> int | None:
        if lines is None:
            return None
        for end in range(len(path), 0, -1):
            if (line := lines.get(path[:end])) is not None:
                return line
        return 1  # the file as a whole

    if not isinstance(data, dict):
        raise ClinicFileInvalid([Problem("", line_of(()), "a clinic file is a set of sections "
                                                          "(version, clinic, locations, …)")])
    found: list[tuple[Path, str]] = []
    clinic: ClinicFile | None = None
    try:
        clinic = ClinicFile.model_validate(data)
        sections = Sections.of(clinic)
    except ValidationError as error:
        found += field_errors(error, ClinicFile)
        sections = Sections.partial(data)
    found += check_sections(sections, line_of)
    if found or clinic is None:
        raise ClinicFileInvalid(bounded(
            Problem(render_path(path), line_of(path), message) for path, message in found))
    clinic._lines = dict(lines or {})
    return clinic
