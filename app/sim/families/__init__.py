"""The instruction families, one module each, each registering its `FAMILY`
(app/sim/family.py says what one holds). `FAMILIES` finds and loads every module of this
package; nothing else lists them, so a new family is one new module here (docs/engine.md, "How to
add an instruction family"). A family may use app/sim's shared services (core.py, ordering.py,
detectors.py) and another family's public functions; no module outside this package imports
one of these modules except for those public functions."""

from __future__ import annotations

import importlib
import pkgutil

from ..family import Family


def _discover() -> tuple[Family, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        family = getattr(module, "FAMILY", None)
        if isinstance(family, Family):
            found.append(family)
    found.sort(key=lambda f: (f.order, f.name))
    seen: dict[str, str] = {}
    for family in found:
        for table in (family.handlers, family.blockers):
            for kind in table:
                if seen.setdefault(kind, family.name) != family.name:
                    raise RuntimeError(f"line kind {kind!r} is registered by {seen[kind]} and "
                                       f"{family.name}")
    return tuple(found)


FAMILIES = _discover()


def merged(part: str) -> dict:
    """One mapping of every family's `part` (`handlers`, `blockers`, `waiting`, `explain`)."""
    out: dict = {}
    for family in FAMILIES:
        out.update(getattr(family, part))
    return out


def of_kind(kind: str) -> Family | None:
    """The family whose handler runs lines of `kind`."""
    return next((f for f in FAMILIES if kind in f.handlers), None)
