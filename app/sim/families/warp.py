"""Warp-level synchronization: `elect.sync` (PTX 9.7.13.14) and `bar.warp.sync` (9.7.13.2, CUDA's
`__syncwarp`), between the lanes of one warp.

An agent is one warp. Where it runs as one mover, its lanes move in lockstep: `elect.sync`
elects lane 0 (`d` = 0, `p` = 1: the agent is the elected thread, and its other threads are in
step with it) and `bar.warp.sync` orders nothing new. An agent declared with `lanes N` runs its
code as N movers, lanes 0..N-1 of its warp (NVIDIA/cutlass#3654: the whole warp waits in
`producer_acquire`, only the elected lane issues the TMA). Then each instruction waits, as
`.sync` says, until every lane of the warp that has not exited executes it: the last lane to come
releases the others in its step. `elect.sync` elects the lowest such lane (deterministically, as
PTX requires: lane 0 unless it exited); `bar.warp.sync` gives its lanes "memory ordering among
threads participating in barrier": each learns what all of them know (`elect.sync` orders no
memory: PTX says it only waits). Only the full
`membermask` (0xffffffff) is modelled; a lane that waits at one of these while another waits at
the other never returns (a deadlock), as on the hardware.
"""

from __future__ import annotations

from ..core import PC
from ..family import STAY, Family
from ..isa import Form
from ..program import SINK

PARKED = "%warp_parked"
AT = {"warp_sync": 1, "elect": 2}
WORDS = {1: "bar.warp.sync", 2: "elect.sync"}


def _done(m, x: int) -> bool:
    return m.regs[x][PC] >= m.code[x].end


def _lanes(m, a: int) -> tuple[int, ...]:
    return m.lanes_of[m.warp_of[a]]


def _all_here(m, a: int, at: int) -> bool:
    """Whether every other lane of `a`'s warp that has not exited is parked at `at`."""
    parked = m.hidden[PARKED]
    return all(x == a or _done(m, x) or m.regs[x][parked] == at for x in _lanes(m, a))


def _step(m, a, r, args, record, kind: str):
    at = AT[kind]
    parked = m.hidden[PARKED] if PARKED in m.hidden else None
    lanes = _lanes(m, a)
    record["operands"] = {"lanes": len(lanes)}
    if len(lanes) == 1:
        if kind == "elect":
            _elected(r, args, 0, 0)
        record["events"].append({"kind": kind, "agent": m.agents[a].name, "leader": 0})
        return None
    if not _all_here(m, a, at):
        r[parked] = at
        record["events"].append({"kind": f"{kind}_waits", "agent": m.agents[a].name})
        return STAY
    here = [x for x in lanes if x == a or m.regs[x][parked] == at]
    known = 0
    if kind == "warp_sync":  # elect.sync only waits: PTX gives it no memory ordering
        for x in here:
            known |= m.know[x]
    leader = min(here, key=lambda x: m.agents[x].lane)
    for x in here:
        m.know[x] |= known
        if kind == "elect":
            code = m.code[x]
            _elected(m.regs[x], code.prepared[m.regs[x][PC]], m.agents[x].lane,
                     m.agents[leader].lane)
        if x != a:
            m.regs[x][parked] = 0
            m.advance(x)
    r[parked] = 0
    record["events"].append({"kind": kind, "agent": m.agents[a].name,
                             "leader": m.agents[leader].lane,
                             "restarted": [m.agents[x].name for x in here if x != a]})
    return None


def _elected(r, args, lane: int, leader: int) -> None:
    dest, pred, _mask = args
    if dest != SINK:
        r[dest] = leader
    if pred != SINK:
        r[pred] = int(lane == leader)


def _elect(m, a, r, args, record):
    return _step(m, a, r, args, record, "elect")


def _warp_sync(m, a, r, args, record):
    return _step(m, a, r, args, record, "warp_sync")


def _ready(m, a, r, args) -> bool:
    """A parked lane moves again only when every other live lane came (one exited)."""
    if PARKED not in m.hidden:
        return True
    at = r[m.hidden[PARKED]]
    return not at or _all_here(m, a, at)


def _waiting(m, a, r, args) -> dict:
    at = r[m.hidden[PARKED]]
    parked = m.hidden[PARKED]
    missing = [m.agents[x].name for x in _lanes(m, a)
               if x != a and not _done(m, x) and m.regs[x][parked] != at]
    return {"warp": WORDS[at], "lanes_missing": missing}


def _explain(m, a, waiting) -> str:
    parked = m.hidden[PARKED]
    where = []
    for name in waiting["lanes_missing"]:
        x = next(i for i, agent in enumerate(m.agents) if agent.name == name)
        at = m.regs[x][parked]
        line = m.current_line(x)
        where.append(f"{name} {'waits at ' + WORDS[at] if at else 'is at ' + line.op}")
    return (f"waits at {waiting['warp']} for the other lanes of its warp ({'; '.join(where)})")


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.13.14 (`elect.sync`) and 9.7.13.2 (`bar.warp.sync`)."""
    return (
        Form("elect.sync", "elect", "d|p, membermask", "9.7.13.14",
             "waits for the warp's lanes, then elects the lowest (lane 0): `d` gets its laneid, "
             "`p` is 1 in the leader only; membermask 0xffffffff"),
        Form("bar.warp.sync", "warp_sync", "membermask", "9.7.13.2",
             "waits until every lane of the warp executed it (CUDA's `__syncwarp`), ordering "
             "their memory; membermask 0xffffffff"),
    )


FAMILY = Family(
    "warp synchronization (app/sim/families/warp.py)", 55,
    {"elect": _elect, "warp_sync": _warp_sync},
    {"elect": _ready, "warp_sync": _ready}, {"elect": _waiting, "warp_sync": _waiting},
    explain={"elect": _explain, "warp_sync": _explain}, registers=(PARKED,), exits=True,
    forms=_isa_forms(), writes_smem=frozenset())
