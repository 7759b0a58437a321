"""Helper calls as the UI shows them: where a helper's lines come from while its call is
compiled, its parameters substituted into its statements and into the text of each line."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

from . import syntax
from .syntax import Name, Simple


@dataclass(frozen=True)
class Expansion:
    """Where a helper's lines come from while its call is compiled."""

    name: str
    source: str
    depth: int
    line: int
    mapping: dict
    words: dict
    comment: str
    outer: object


def line_text(text: str, pos) -> str:
    start = text.rfind("\n", 0, pos.start) + 1
    end = text.find("\n", max(pos.end - 1, pos.start))
    end = len(text) if end == -1 else end
    return " ".join(part.strip() for part in text[start:end].splitlines() if part.strip())


def trailing_comment(text: str, pos) -> str:
    end = text.find("\n", pos.end)
    rest = text[pos.end:len(text) if end == -1 else end]
    at = rest.find("//")
    return rest[at:].strip() if at != -1 else ""


def substitute_words(text: str, words: dict) -> str:
    head, _, tail = text.partition(" ")
    for name, value in words.items():
        tail = re.sub(rf"\b{re.escape(name)}\b(?!\s*=[^=])", value, tail)
    return f"{head} {tail}" if tail else head


def substitute(node, mapping: dict):
    """A copy of a helper's statement or expression with its parameters replaced."""
    if isinstance(node, Name):
        return mapping.get(node.name, node)
    if isinstance(node, Simple):
        name, field = node.target
        index = None if node.index is None else substitute(node.index, mapping)
        arg = mapping.get(name)
        if isinstance(arg, Name):
            node = replace(node, target=(arg.name, field))
        elif (isinstance(arg, syntax.Index) and isinstance(arg.base, Name) and field is None
              and index is None):  # `h(ph[j])` where the helper writes its parameter
            node = replace(node, target=(arg.base.name, None))
            index = arg.index
        value = None if node.value is None else substitute(node.value, mapping)
        return replace(node, value=value, index=index)
    if isinstance(node, tuple):
        return tuple(substitute(n, mapping) for n in node)
    if hasattr(node, "__dataclass_fields__") and not isinstance(node, syntax.Pos):
        changes = {f.name: substitute(getattr(node, f.name), mapping) for f in fields(node)
                   if f.name not in ("pos", "opcode", "name", "var", "op", "type")}
        return replace(node, **changes)
    return node
