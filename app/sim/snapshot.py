"""Snapshots (the full state after a step) and the layout (what never changes during a run), as
docs/trace-format.md defines them. Everything the UI draws comes from here; it derives nothing."""

from __future__ import annotations

from . import smem
from .copies import (
    LOAD,
    OP_BAR,
    OP_DIR,
    OP_END,
    OP_NEXT,
    OP_STAGE,
    OP_TILE,
    OP_WRITING,
    STORE,
    op_name,
    pending_groups,
)
from .tensor_core import MMA

ROLES = (("accum", "accum"), ("full", "full"), ("empty", "empty"))


def snapshot(m) -> dict:
    return {
        "step": m.step_no,
        "status": m.status,
        "barriers": [{"name": name, **b.as_dict(), "tx_held": m.held[i]}
                     for i, (name, b) in enumerate(zip(m.barrier_names, m.barriers,
                                                       strict=True))],
        "stages": [
            {"name": m.stage_names[s], "tile": smem.tile_index(m.stage_tile[s]),
             "chunks": [{"tile": smem.tile_index(t), "proxy": smem.WRITER_NAMES[w],
                         "fenced": w == smem.W_GENERIC_FENCED,
                         **_shift(t)} for t, w in m.chunks[s]]}
            for s in range(m.n_stages)
        ],
        "agents": [_agent(m, a) for a in range(m.n_agents)],
        "tma": [{"op": op_name(m, op), "direction": "load" if op[OP_DIR] == LOAD else "store",
                 "tile": smem.tile_index(op[OP_TILE]), "stage": m.stage_names[op[OP_STAGE]],
                 "chunk": op[OP_NEXT], "chunks": op[OP_END],
                 "barrier": m.barrier_names[op[OP_BAR]] if op[OP_DIR] == LOAD else None,
                 **({"writing": op[OP_WRITING]} if op[OP_DIR] == STORE else {})}
                for op in m.tma],
        "bulk_groups": [{"agent": m.agents[a].name, "committed": m.bulk_committed[a],
                         "pending_reads": pending_groups(m, a, True)}
                        for a in range(m.n_agents) if "store" in m.code[a].kinds],
        "tensor_core": [
            {"op": f"mma:k{smem.tile_index(tile)}" if kind == MMA else "commit", "kind": kind,
             "stage": m.stage_names[stage] if kind == MMA else None,
             "tile": smem.tile_index(tile),
             "barrier": m.barrier_names[b] if kind != MMA else None}
            for kind, stage, tile, b, *_ in m.tensor_core
        ],
    }


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
        "agents": [{"name": a.name, "role": a.role, "cta": a.cta,
                    "program": [a.nodes[n].text for n in a.listing],
                    "source_lines": [a.nodes[n].source_line for n in a.listing]}
                   for a in m.agents],
    }


def _shift(content: int) -> dict:
    """A chunk holding its tile's bytes from another position: how far (docs/engine.md)."""
    delta = smem.unshift(content)[1]
    return {"shifted": delta} if delta else {}
