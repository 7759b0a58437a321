"""Register updates: the assignments written on one source line (`++w`, `phase ^= 1`,
`k = k + 1`) are one step of their own (docs/language.md). Not a PTX instruction; a family so
that the machine runs every line kind the same way."""

from __future__ import annotations

from ..core import checked
from ..family import Family


def _assign(m, a, r, args, record) -> None:
    (updates,) = args
    names = m.agents[a].registers
    touched = []
    for reg, fn in updates:
        r[reg] = checked(fn(r))
        if reg not in touched:
            touched.append(reg)
    touched.sort()
    base = names[touched[0] - 1].split(".")[0]
    value = {}
    for reg in touched:
        name = names[reg - 1]
        value[name[len(base) + 1:] if name.startswith(base + ".") else name] = r[reg]
    record["operands"] = {names[reg - 1]: r[reg] for reg in touched}
    record["events"].append({"kind": "register", "agent": m.agents[a].name, "name": base,
                             "value": value})


FAMILY = Family("register updates (app/sim/families/registers.py)", 0, {"assign": _assign},
                writes_smem=frozenset())
