"""Links written as templates (`https://meet.example.org/visit/{room}`): which
placeholders a template uses, checked once when it is loaded, and the link filled in.

A template must be an https address whose host is fixed: a placeholder may fill the
path, query or fragment only, so a filled-in value can never send a patient elsewhere.
Each value is escaped for a URL.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from urllib.parse import quote, urlsplit


def template_fields(template: str, allowed: frozenset[str], *, what: str = "link template"
                    ) -> frozenset[str]:
    """The placeholder names `template` uses; ValueError, in words for whoever wrote it,
    for an address that is not https, a placeholder in the host, an unknown placeholder,
    a format spec or conversion, or unbalanced braces."""
    parts = urlsplit(template)
    if parts.scheme != "https" or not parts.netloc:
        raise ValueError(f"a {what} must be an https:// address")
    if "{" in parts.netloc or "}" in parts.netloc:
        raise ValueError(f"a {what}'s host cannot hold a placeholder")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"a {what} has unbalanced braces ({error})") from error
    names = set()
    for _text, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in allowed:
            listed = ", ".join(f"{{{name}}}" for name in sorted(allowed))
            raise ValueError(f"unknown placeholder {{{field}}} in a {what} (allowed: {listed})")
        if spec or conversion:
            raise ValueError(f"placeholder {{{field}}} cannot take a format or conversion")
        names.add(field)
    return frozenset(names)


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """`template` (already checked) with each value escaped for a URL."""
    return template.format_map({key: quote(value, safe="") for key, value in values.items()})
