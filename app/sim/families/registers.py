"""Register updates: the assignments written on one source line (`++w`, `phase ^= 1`,
`k = k + 1`) are one step of their own (docs/language.md). Not a PTX instruction; a family so
that the machine runs every line kind the same way."""

from __future__ import annotations

from ..core import REGISTER_LIMIT, checked
from ..family import Family


def _assign(m, a, r, args, record) -> None:
    (updates,) = args
    code = m.code[a]
    pc = r[0]
    if code.prepared[pc] is args and code.updates[pc] is not None:
        code.updates[pc](r)  # the same updates, compiled into one function (agent_code.py)
    else:
        for reg, fn in updates:
            value = fn(r)
            r[reg] = value if -REGISTER_LIMIT <= value <= REGISTER_LIMIT else checked(value)
    agent = m.agents[a]
    plan = _PLANS.get(id(updates))
    if plan is None or plan[0] is not updates or plan[1] is not agent.registers:
        plan = _plan(updates, agent.registers)
    _, _, base, shown, keyed = plan
    record["operands"] = {name: r[reg] for name, reg in shown}
    record["events"].append({"kind": "register", "agent": agent.name, "name": base,
                             "value": {key: r[reg] for key, reg in keyed}})


_PLANS: dict[int, tuple] = {}
"""Per line of updates (by identity), what its record shows: the same for every step."""


def _plan(updates: tuple, names: tuple[str, ...]) -> tuple:
    """(updates, names, the event's name, (name in the operands, register) and (key in the
    event's value, register) of each register written, in register order), kept in `_PLANS`.
    The entry holds
    `updates` and `names` themselves, so its key names no other object while it is kept."""
    touched = []
    for reg, _fn in updates:
        if reg not in touched:
            touched.append(reg)
    touched.sort()
    base = names[touched[0] - 1].split(".")[0]
    shown = tuple(names[reg - 1] for reg in touched)
    keys = tuple(name[len(base) + 1:] if name.startswith(base + ".") else name
                 for name in shown)
    if len(_PLANS) > 4096:
        _PLANS.clear()
    plan = _PLANS[id(updates)] = (updates, names, base,
                                  tuple(zip(shown, touched, strict=True)),
                                  tuple(zip(keys, touched, strict=True)))
    return plan


FAMILY = Family("register updates (app/sim/families/registers.py)", 0, {"assign": _assign},
                writes_smem=frozenset())
