"""Snapshots (the full state after a step) and the layout (what never changes during a run), as
docs/trace-format.md defines them. Everything the UI draws comes from here; it derives nothing."""

from __future__ import annotations

ROLES = (("accum", "accum"), ("full", "full"), ("empty", "empty"))


ORDER = ("step", "status", "barriers", "stages", "agents", "tma", "bulk_groups", "tensor_core")
"""The keys of a snapshot in the order its JSON has always had (shipped traces are compared as
bytes); a family's new keys follow them."""


def snapshot(m) -> dict:
    """The state after a step: the machine's own parts (step, status, agents), then every
    family's (`Family.snapshot`: barriers, stages, tma, bulk_groups, tensor_core, ...)."""
    parts = {"step": m.step_no, "status": m.status,
             "agents": [_agent(m, a, m.waiting_on(a), m.wait_at(a))
                        for a in range(m.n_agents)]}
    for part in m.snapshot_parts:
        parts.update(part(m))
    return _ordered(parts)


def _ordered(parts: dict) -> dict:
    out = {key: parts.pop(key) for key in ORDER if key in parts}
    out.update(parts)
    return out


def _agent(m, a: int, waiting: dict | None, wait: dict | None) -> dict:
    """Agent `a`'s part: a function of its registers, `waiting` (`waiting_on`) and `wait`
    (`wait_at`), both None once it is done."""
    program = m.agents[a]
    r = m.regs[a]
    done = r[0] >= len(m.code[a].nodes)
    names = program.registers
    registers = {name: r[i + 1] for i, name in enumerate(names) if name in program.shown}
    line_no = len(program.listing) if done else m.code[a].line_of[r[0]]
    return {
        "name": program.name,
        "pc": line_no,
        "line": None if done else line_no,
        "iteration": 0 if program.iteration is None else r[program.iteration],
        "registers": registers,
        "status": "done" if done else ("waiting" if waiting else "running"),
        "waiting_on": waiting,
        "wait": wait,
    }


_UNSEEN = object()


class Snapshots:
    """The snapshots of one machine as it steps (a trace window): a part whose inputs are those
    of the snapshot before (an agent's registers and waits, a family's `snapshot_inputs`) is
    that snapshot's object again. Building a window's snapshots then costs what changed, and
    `patch` finds what changed by identity. Snapshots taken here share those objects: read
    them, never change them."""

    def __init__(self, m) -> None:
        from .families import FAMILIES  # the package imports this module's importers

        self.m = m
        self.agent_inputs: list = [_UNSEEN] * m.n_agents
        self.agents: list = [None] * m.n_agents
        self.parts = [[f.snapshot, f.snapshot_inputs, _UNSEEN, None]
                      for f in FAMILIES if f.snapshot]

    def take(self) -> dict:
        """`snapshot(m)`, equal to it, sharing the parts that did not change."""
        m = self.m
        self._refresh_agents()
        parts = {"step": m.step_no, "status": m.status, "agents": list(self.agents)}
        for slot in self.parts:
            parts.update(self._refresh(slot)[0])
        return _ordered(parts)

    def _refresh_agents(self) -> list[tuple[int, dict | None]]:
        """Rebuild the agents whose inputs changed; (agent, its part before) of each."""
        m, agents, agent_inputs = self.m, self.agents, self.agent_inputs
        rebuilt = []
        for a in range(m.n_agents):
            inputs = (list(m.regs[a]), m.waiting_on(a), m.wait_at(a))
            if inputs != agent_inputs[a]:
                agent_inputs[a] = inputs
                rebuilt.append((a, agents[a]))
                agents[a] = _agent(m, a, inputs[1], inputs[2])
        return rebuilt

    def _refresh(self, slot: list) -> tuple[dict, bool]:
        """A family's part, rebuilt where its inputs changed (or it declares none); and whether
        it was."""
        build, inputs_of = slot[0], slot[1]
        if inputs_of is None:
            return build(self.m), True
        inputs = inputs_of(self.m)
        if inputs == slot[2]:
            return slot[3], False
        slot[2], slot[3] = inputs, build(self.m)
        return slot[3], True

    def take_base(self) -> dict:
        """`take()`, the snapshot that `patch_next` then patches from."""
        base = self.take()
        self.values = dict(base)
        return base

    def patch_next(self) -> dict:
        """`patch(before, take())`, `before` the snapshot of the step before (`take_base`, then
        each `patch_next`), without building the snapshot: a part whose inputs did not change
        is not looked at, only what was rebuilt is compared."""
        m, values = self.m, self.values
        replaced, items = {"step": m.step_no}, {}
        values["step"] = m.step_no
        if m.status != values["status"]:
            replaced["status"] = values["status"] = m.status
        moved = {str(a): self.agents[a] for a, before in self._refresh_agents()
                 if self.agents[a] != before}
        if moved:
            items["agents"] = moved
        for slot in self.parts:
            part, rebuilt = self._refresh(slot)
            if not rebuilt:
                continue
            for name, value in part.items():
                _compare(name, value, values.get(name), replaced, items)
                values[name] = value
        order = values.keys()
        if len(replaced) > 1:
            replaced = {name: replaced[name] for name in order if name in replaced}
        if len(items) > 1:
            items = {name: items[name] for name in order if name in items}
        return {"set": replaced, "items": items}


def patch(old: dict, new: dict) -> dict:
    """What changed from snapshot `old` to `new`: `set` (fields replaced whole) and `items`
    (for lists of the same length, the changed items by index). static/js/player.js applies
    it; a part or item that is the same object (`Snapshots`) is skipped unread."""
    replaced, items = {}, {}
    for name, value in new.items():
        _compare(name, value, old.get(name), replaced, items)
    return {"set": replaced, "items": items}


def _compare(name: str, value, before, replaced: dict, items: dict) -> None:
    """One field of `patch`: unchanged, its changed items (a list of the same length) or
    replaced whole."""
    if value is before or value == before:
        return
    if isinstance(value, list) and isinstance(before, list) and len(value) == len(before):
        items[name] = {str(i): v for i, (v, b) in enumerate(zip(value, before, strict=True))
                       if v is not b and v != b}
    else:
        replaced[name] = value


def layout(m) -> dict:
    """Names, roles, programs and their source lines."""
    barriers = []
    for decl in m.program.barriers:
        role = next((r for prefix, r in ROLES if decl.array.startswith(prefix)), "bar")
        stage = int(decl.name[decl.name.index("[") + 1:-1]) if "[" in decl.name else None
        barriers.append({"name": decl.name, "role": role, "stage": stage,
                         "array": decl.array, "cta": decl.cta})
    return {
        "barriers": barriers,
        "stages": [{"name": s.name, "chunks": s.chunks, "chunk_bytes": s.chunk_bytes,
                    "bytes": s.bytes, "cta": s.cta} for s in m.program.stages],
        "cluster": m.program.cluster,
        "agents": [_agent_layout(a) for a in m.agents],
    }


def _agent_layout(a) -> dict:
    out = {"name": a.name, "role": a.role, "cta": a.cta,
           "program": [a.nodes[n].text for n in a.listing],
           "source_lines": [a.nodes[n].source_line for n in a.listing]}
    if a.deleted:
        out["deleted_lines"] = [{"before": before, "source_line": line, "text": text, "note": note}
                                for before, line, text, note in a.deleted]
    return out
