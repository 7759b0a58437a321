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
             "agents": [_agent(m, a) for a in range(m.n_agents)]}
    for part in m.snapshot_parts:
        parts.update(part(m))
    out = {key: parts.pop(key) for key in ORDER if key in parts}
    out.update(parts)
    return out


def _agent(m, a: int) -> dict:
    program = m.agents[a]
    r = m.regs[a]
    line = m.current_line(a)
    done = line is None
    waiting = None if done else m.waiting_on(a)
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
        "wait": None if done else m.wait_at(a),
    }


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
