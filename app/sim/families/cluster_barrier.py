"""The cluster barrier, `barrier.cluster.arrive{.release,.relaxed}` / `barrier.cluster.wait
{.acquire}` (PTX 9.7.13.3), and `fence.mbarrier_init.release.cluster` (9.7.13.4).

Every thread of the cluster (here: every agent, and every lane of an agent with lanes) arrives
once, then waits; the barrier completes when every thread that has not exited has arrived, and is
at once reinitialized, so a thread that saw it complete may arrive again. A second arrival before
the completion is undefined behaviour (`cluster_arrive_twice`: "each thread must arrive at the
barrier only once before the barrier completes"); a wait without an arrival never returns (the
barrier waits for that thread too). Memory: `wait` (`.acquire` by default) makes visible what every
thread did before its `arrive`, where that arrive was a `.release` (the default); a `.relaxed`
arrive releases nothing but what a `fence.mbarrier_init.release.cluster` before it released: the
thread's own earlier `mbarrier.init`s. That is how an init becomes visible to the other CTAs of
the cluster (core.py, `init_known`): CUTLASS's `fence_barrier_init()`, then
`cluster_arrive_relaxed()` and `cluster_wait()`.

Per agent the state is two hidden registers (its arrival, and the inits it fenced); what the
barrier's current and last completed use carry is two knowledge slots.
"""

from __future__ import annotations

from ..barrier import UndefinedBehavior
from ..core import OWN_INITS, PC
from ..family import Family
from ..isa import Form, Slot

ARRIVED = "%cluster_arrived"
FENCED = "%init_fenced"
PENDING, COMPLETED = 1, 2
FAMILY_NAME = "cluster barrier (app/sim/families/cluster_barrier.py)"


def _done(m, x: int) -> bool:
    return m.regs[x][PC] >= m.code[x].end


def _all_arrived(m) -> bool:
    reg = m.hidden[ARRIVED]
    return all(_done(m, x) or m.regs[x][reg] == PENDING for x in range(m.n_agents))


def _complete(m, record: dict) -> None:
    reg = m.hidden[ARRIVED]
    for x in range(m.n_agents):
        if m.regs[x][reg] == PENDING:
            m.regs[x][reg] = COMPLETED
    base = m.slot_base[FAMILY_NAME]
    m.carried[base + 1], m.carried[base] = m.carried[base], 0
    record["events"].append({"kind": "cluster_barrier_completed"})


def _arrive(m, a, r, args, record) -> None:
    reg = m.hidden[ARRIVED]
    name = m.agents[a].name
    if r[reg] == PENDING:
        raise UndefinedBehavior("cluster_arrive_twice", (
            f"{name} arrived at the cluster barrier again before it completed: PTX 9.7.13.3 "
            "has each thread arrive only once before the barrier completes"))
    r[reg] = PENDING
    line = m.code[a].nodes[r[PC]]
    base = m.slot_base[FAMILY_NAME]
    m.carried[base] |= r[m.hidden[FENCED]] if line.sem == "relaxed" else m.know[a]
    record["operands"] = {"sem": line.sem}
    record["events"].append({"kind": "cluster_arrive", "agent": name})
    if _all_arrived(m):
        _complete(m, record)


def _wait(m, a, r, args, record) -> None:
    reg = m.hidden[ARRIVED]
    if r[reg] == PENDING:  # every other thread arrived or exited: the barrier completes now
        _complete(m, record)
    r[reg] = 0
    line = m.code[a].nodes[r[PC]]
    if line.sem != "relaxed":
        m.know[a] |= m.carried[m.slot_base[FAMILY_NAME] + 1]
    record["operands"] = {"sem": line.sem}
    record["events"].append({"kind": "cluster_wait_returned", "agent": m.agents[a].name})


def _fence(m, a, r, args, record) -> None:
    """`fence.mbarrier_init.release.cluster`: a release that orders only the thread's own
    earlier `mbarrier.init`s; a later relaxed arrive carries them."""
    own = r[m.hidden[OWN_INITS]]
    r[m.hidden[FENCED]] |= own & m.know[a]
    record["events"].append({"kind": "mbarrier_init_fence", "agent": m.agents[a].name})


def _ready(m, a, r, args) -> bool:
    state = r[m.hidden[ARRIVED]]
    return state == COMPLETED or (state == PENDING and _all_arrived(m))


def _waiting(m, a, r, args) -> dict:
    reg = m.hidden[ARRIVED]
    missing = [m.agents[x].name for x in range(m.n_agents)
               if not _done(m, x) and m.regs[x][reg] != PENDING]
    return {"cluster_barrier": True, "arrived": m.regs[a][reg] == PENDING, "missing": missing}


def _explain(m, a, waiting) -> str:
    if not waiting["arrived"]:
        return ("waits at barrier.cluster.wait without having arrived (barrier.cluster.arrive): "
                "the barrier waits for every thread of the cluster, this one included")
    return ("waits at barrier.cluster.wait for threads that have not arrived: "
            + ", ".join(waiting["missing"]))


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 sections 9.7.13.3 (`barrier.cluster`) and 9.7.13.4 (`fence.mbarrier_init`)."""
    aligned = Slot("aligned", ("aligned",),
                   note="every thread of the warp executes the same instruction")
    return (
        Form("barrier.cluster.arrive", "cluster_arrive", "", "9.7.13.3",
             "this thread arrives at the cluster barrier (once per use); `.release` (default) "
             "makes its earlier accesses visible to the threads that wait, `.relaxed` only "
             "what a `fence.mbarrier_init` released",
             (Slot("sem", ("release", "relaxed"), default="release"), aligned)),
        Form("barrier.cluster.wait", "cluster_wait", "", "9.7.13.3",
             "waits until every thread of the cluster that has not exited arrived; `.acquire`",
             (Slot("sem", ("acquire",), default="acquire"), aligned)),
        Form("fence.mbarrier_init", "mbarrier_init_fence", "", "9.7.13.4",
             "releases, at cluster scope, this thread's earlier `mbarrier.init`s (carried by a "
             "later relaxed arrive)",
             (Slot("sem", ("release",), required=True),
              Slot("scope", ("cluster",), required=True))),
    )


FAMILY = Family(
    FAMILY_NAME, 60,
    {"cluster_arrive": _arrive, "cluster_wait": _wait, "mbarrier_init_fence": _fence},
    {"cluster_wait": _ready}, {"cluster_wait": _waiting}, explain={"cluster_wait": _explain},
    registers=(ARRIVED, FENCED, OWN_INITS), slots=lambda program: 2, exits=True,
    forms=_isa_forms(), writes_smem=frozenset())
