"""Warp-level synchronization: `elect.sync` (PTX 9.7.13.14) and `bar.warp.sync` (9.7.13.2, CUDA's
`__syncwarp`), between the lanes of one warp named by a `membermask`.

An agent is one warp. Where it runs as one mover, its lanes move in lockstep: `elect.sync`
elects lane 0 (`d` = 0, `p` = 1: the agent is the elected thread, and its other threads are in
step with it) and `bar.warp.sync` orders nothing new; its mask is the full one (the language
refuses another: threads outside it would execute the line). An agent declared with `lanes N`
runs its code as N movers, lanes 0..N-1 of its warp (NVIDIA/cutlass#3654: the whole warp waits
in `producer_acquire`, only the elected lane issues the TMA). Then each instruction waits, as
`.sync` says, until every modelled lane of its `membermask` that has not exited executes it
with the same mask (lanes N..31 are not modelled: their bits are not waited for); the last
lane to come releases the others in its step. A lane outside its own mask is undefined
behaviour (rule `warp_mask_self`: "the behavior is undefined if the executing thread is not in
the membermask"). `elect.sync` elects the lowest live lane of the mask (deterministically, as
PTX requires); `bar.warp.sync` gives its lanes "memory ordering among threads participating in
barrier": each learns what all of them know (`elect.sync` orders no memory: PTX says it only
waits). Lanes that wait with different masks do not meet (PTX: "executed a bar.warp.sync with
the same membermask value"), and a lane that waits at one of these while another waits at the
other never returns (a deadlock), as on the hardware.
"""

from __future__ import annotations

from ..barrier import UndefinedBehavior
from ..core import PC
from ..family import STAY, Family
from ..isa import Form
from ..program import SINK

PARKED = "%warp_parked"
"""Where a lane waits: 0 (nowhere), or the instruction (`AT`) plus its mask shifted by 2."""
AT = {"warp_sync": 1, "elect": 2}
WORDS = {1: "bar.warp.sync", 2: "elect.sync"}
SECTION = {1: "9.7.13.2", 2: "9.7.13.14"}
FULL = 0xFFFFFFFF


def _done(m, x: int) -> bool:
    return m.regs[x][PC] >= m.code[x].end


def _lanes(m, a: int) -> tuple[int, ...]:
    return m.lanes_of[m.warp_of[a]]


def _members(m, a: int, mask: int) -> list[int]:
    """The modelled lanes of `a`'s warp whose bit `mask` sets."""
    return [x for x in _lanes(m, a) if mask >> m.agents[x].lane & 1]


def _all_here(m, a: int, key: int) -> bool:
    """Whether every other live lane of the mask in `key` waits at the same instruction with
    the same mask."""
    parked = m.hidden[PARKED]
    return all(x == a or _done(m, x) or m.regs[x][parked] == key
               for x in _members(m, a, key >> 2))


def _mask(kind: str, r, args) -> int:
    return (args[2] if kind == "elect" else args[0])(r) & FULL


def _step(m, a, r, args, record, kind: str):
    at = AT[kind]
    parked = m.hidden[PARKED] if PARKED in m.hidden else None
    lanes = _lanes(m, a)
    mask = _mask(kind, r, args)
    record["operands"] = {"lanes": len(lanes)}
    if mask != FULL:
        record["operands"]["membermask"] = mask
    if len(lanes) == 1:
        if kind == "elect":
            _elected(r, args, 0, 0)
        record["events"].append({"kind": kind, "agent": m.agents[a].name, "leader": 0})
        return None
    lane = m.agents[a].lane
    if not mask >> lane & 1:
        raise UndefinedBehavior("warp_mask_self", (
            f"lane {lane} executed {WORDS[at]} with membermask {mask:#x}, which does not name "
            f"it; PTX {SECTION[at]}: the executing thread must be in the membermask"))
    key = at | mask << 2
    if not _all_here(m, a, key):
        r[parked] = key
        record["events"].append({"kind": f"{kind}_waits", "agent": m.agents[a].name})
        return STAY
    here = [x for x in _members(m, a, mask) if x == a or m.regs[x][parked] == key]
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
    event = {"kind": kind, "agent": m.agents[a].name, "leader": m.agents[leader].lane,
             "restarted": [m.agents[x].name for x in here if x != a]}
    if mask != FULL:
        event["membermask"] = mask
    record["events"].append(event)
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
    """A parked lane moves again only when every other live lane of its mask came (one
    exited)."""
    if PARKED not in m.hidden:
        return True
    key = r[m.hidden[PARKED]]
    return not key or _all_here(m, a, key)


def _waiting(m, a, r, args) -> dict:
    parked = m.hidden[PARKED]
    key = r[parked]
    missing = [m.agents[x].name for x in _members(m, a, key >> 2)
               if x != a and not _done(m, x) and m.regs[x][parked] != key]
    out = {"warp": WORDS[key & 3], "lanes_missing": missing}
    if key >> 2 != FULL:
        out["membermask"] = key >> 2
    return out


def _explain(m, a, waiting) -> str:
    parked = m.hidden[PARKED]
    where = []
    for name in waiting["lanes_missing"]:
        x = next(i for i, agent in enumerate(m.agents) if agent.name == name)
        key = m.regs[x][parked]
        line = m.current_line(x)
        if key:
            text = f"waits at {WORDS[key & 3]}"
            if key >> 2 != FULL:
                text += f" with membermask {key >> 2:#x}"
        else:
            text = f"is at {line.op}"
        where.append(f"{name} {text}")
    lanes = "the other lanes of its warp"
    if "membermask" in waiting:
        lanes = f"the other lanes of its membermask {waiting['membermask']:#x}"
    return f"waits at {waiting['warp']} for {lanes} ({'; '.join(where)})"


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.13.14 (`elect.sync`) and 9.7.13.2 (`bar.warp.sync`)."""
    return (
        Form("elect.sync", "elect", "d|p, membermask", "9.7.13.14",
             "waits for the live lanes of the mask, then elects the lowest: `d` gets its "
             "laneid, `p` is 1 in the leader only; a mask other than 0xffffffff needs `lanes N`"),
        Form("bar.warp.sync", "warp_sync", "membermask", "9.7.13.2",
             "waits until every live lane of the mask executed it with the same mask (CUDA's "
             "`__syncwarp`), ordering their memory; a mask other than 0xffffffff needs "
             "`lanes N`"),
    )


FAMILY = Family(
    "warp synchronization (app/sim/families/warp.py)", 55,
    {"elect": _elect, "warp_sync": _warp_sync},
    {"elect": _ready, "warp_sync": _ready}, {"elect": _waiting, "warp_sync": _waiting},
    explain={"elect": _explain, "warp_sync": _explain}, registers=(PARKED,), exits=True,
    forms=_isa_forms(), writes_smem=frozenset())
