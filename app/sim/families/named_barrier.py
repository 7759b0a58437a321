"""Named barriers: `bar.sync` / `bar.arrive` and `barrier.sync` / `barrier.arrive` (PTX 9.7.13.1),
the sixteen barriers 0..15 of each CTA, which count threads.

An agent is a warp: its arrival counts 32 threads (32 per warp of a `warps N` agent), and a warp
split into lanes (`lanes N`) arrives once each of its lanes that has not exited has executed the
instruction (PTX: "marks warps' arrival at barrier"). The barrier completes when the threads
arrived reach the count, or, with no count, every thread of the CTA that has not exited; then
every waiting `sync` restarts in the same step and the barrier is reinitialized. A warp that
arrives twice before the reset counts twice (PTX: "care must be taken to keep a warp from
executing more barrier instructions than intended"): vllm-project/vllm#26026's hang. PTX lets
warps mix forms "using the same barrier name and thread count"; arrivals that give different
counts in one use are undefined behaviour here (`bar_count_mismatch`). Memory: each arrival
releases what the warp knows (ordering.py), and a `sync` restarted by the completion learns what
every arrival of that use released ("prior memory accesses requested by this thread are
performed relative to all threads participating in the barrier").

The state is three hidden registers per agent (its arrivals and the count it gave, per barrier,
and the barrier a `sync` is parked on); what a barrier holds is derived from them, and what its
arrivals released is one knowledge slot per (CTA, barrier).
"""

from __future__ import annotations

from ..barrier import UndefinedBehavior
from ..core import PC, operand_range
from ..family import STAY, Family
from ..isa import Form, Gap, Slot
from ..program import ProgramError

IDS = 16
ARRIVED, COUNT, PARKED = "%bar_arrived", "%bar_count", "%bar_parked"
A_BITS, C_BITS = 8, 12
ALL = (1 << C_BITS) - 1
"""The count an arrival without one stores: every thread of the CTA."""
FAMILY_NAME = "named barriers (app/sim/families/named_barrier.py)"


def _get(value: int, i: int, width: int) -> int:
    return value >> (i * width) & ((1 << width) - 1)


def _put(value: int, i: int, width: int, x: int) -> int:
    mask = ((1 << width) - 1) << (i * width)
    return (value & ~mask) | x << (i * width)


def _done(m, x: int) -> bool:
    return m.regs[x][PC] >= m.code[x].end


def _operands(r, args) -> tuple[int, int | None]:
    bar_id, count = args
    i = operand_range(bar_id(r), 0, IDS - 1, "a named barrier's id")
    if count is None:
        return i, None
    n = count(r)
    if not (0 < n <= 1024 and n % 32 == 0):
        raise ProgramError("operand_range", "a named barrier's thread count is a multiple of "
                                            f"the warp size (32) up to 1024; got {n}")
    return i, n


def _warps(m, cta: int):
    """Each warp of the CTA: its lane-0 agent and its movers."""
    return [(w, movers) for w, movers in m.lanes_of.items() if m.agent_cta[w] == cta]


def arrived(m, cta: int, i: int) -> tuple[int, list[str]]:
    """Threads arrived at barrier `i` of CTA `cta` in its current use, and the movers that
    arrived (with how often, where more than once)."""
    reg = m.hidden[ARRIVED]
    threads, names = 0, []
    for w, movers in _warps(m, cta):
        counts = []
        for x in movers:
            k = _get(m.regs[x][reg], i, A_BITS)
            if k:
                names.append(m.agents[x].name if k == 1 else f"{m.agents[x].name} x{k}")
            if k or not _done(m, x):
                counts.append(k)
        if counts:
            threads += min(counts) * 32 * m.agents[w].warps
    return threads, names


def expected(m, cta: int, i: int) -> int | None:
    """The count of barrier `i`'s current use (None: no arrival yet)."""
    reg = m.hidden[COUNT]
    for _, movers in _warps(m, cta):
        for x in movers:
            stored = _get(m.regs[x][reg], i, C_BITS)
            if stored:
                return _all_threads(m, cta, live=True) if stored == ALL else stored
    return None


def _all_threads(m, cta: int, live: bool) -> int:
    """The CTA's threads (those of warps with a mover that has not exited, when `live`)."""
    return sum(32 * m.agents[w].warps for w, movers in _warps(m, cta)
               if not live or not all(_done(m, x) for x in movers))


def _count(stored: int) -> str:
    return "no count (every thread)" if stored == ALL else f"count {stored}"


def _slot(m, cta: int, i: int) -> int:
    return m.slot_base[FAMILY_NAME] + cta * IDS + i


def _arrive(m, a, r, args, record, sync: bool):
    cta = m.agent_cta[a]
    parked = m.hidden[PARKED]
    if sync and r[parked]:
        i = r[parked] - 1  # a lane or warp exited, and the barrier it waited for completed
        record["operands"] = {"named_barrier": i}
        _complete(m, cta, i, record, a, True)
        return None
    i, n = _operands(r, args)
    mine = ALL if n is None else n
    a_reg, c_reg = m.hidden[ARRIVED], m.hidden[COUNT]
    for _, movers in _warps(m, cta):
        for x in movers:
            other = _get(m.regs[x][c_reg], i, C_BITS)
            if other and other != mine:
                raise UndefinedBehavior("bar_count_mismatch", (
                    f"{m.agents[a].name} arrived at named barrier {i} with {_count(mine)} while "
                    f"{m.agents[x].name}'s arrival in the same use gave {_count(other)}: PTX "
                    "9.7.13.1 has the warps of one use name the same barrier and thread count"))
    r[a_reg] = _put(r[a_reg], i, A_BITS, _get(r[a_reg], i, A_BITS) + 1)
    r[c_reg] = _put(r[c_reg], i, C_BITS, mine)
    m.carried[_slot(m, cta, i)] |= m.know[a]
    threads, names = arrived(m, cta, i)
    want = expected(m, cta, i)
    record["operands"] = {"named_barrier": i, "count": n, "threads_arrived": threads,
                          "threads_expected": want}
    record["events"].append({"kind": "bar_arrive", "named_barrier": i,
                             "agent": m.agents[a].name, "threads_arrived": threads,
                             "threads_expected": want})
    if threads >= want:
        _complete(m, cta, i, record, a, sync)
        return None
    if sync:
        r[parked] = i + 1
        return STAY
    return None


def _complete(m, cta: int, i: int, record: dict, a: int, sync: bool) -> None:
    """Barrier `i` of `cta` completes: it is reinitialized, and every `sync` parked on it
    restarts, learning what the use's arrivals released."""
    slot = _slot(m, cta, i)
    released, m.carried[slot] = m.carried[slot], 0
    a_reg, c_reg, parked = m.hidden[ARRIVED], m.hidden[COUNT], m.hidden[PARKED]
    restarted = []
    for _, movers in _warps(m, cta):
        for x in movers:
            r = m.regs[x]
            r[a_reg] = _put(r[a_reg], i, A_BITS, 0)
            r[c_reg] = _put(r[c_reg], i, C_BITS, 0)
            if r[parked] == i + 1 and x != a:
                r[parked] = 0
                m.know[x] |= released
                restarted.append(m.agents[x].name)
                m.advance(x)
    if sync:
        m.regs[a][parked] = 0
        m.know[a] |= released
    record["events"].append({"kind": "bar_completed", "named_barrier": i,
                             "restarted": restarted})


def _sync(m, a, r, args, record):
    return _arrive(m, a, r, args, record, True)


def _arrive_only(m, a, r, args, record):
    return _arrive(m, a, r, args, record, False)


def _ready(m, a, r, args) -> bool:
    """A `sync` parked on its barrier moves again only when the barrier completes without a
    new arrival (a warp it waited for exited)."""
    parked = r[m.hidden[PARKED]]
    if not parked:
        return True
    cta = m.agent_cta[a]
    want = expected(m, cta, parked - 1)
    return want is not None and arrived(m, cta, parked - 1)[0] >= want


def _waiting(m, a, r, args) -> dict:
    cta = m.agent_cta[a]
    i = r[m.hidden[PARKED]] - 1
    threads, names = arrived(m, cta, i)
    return {"named_barrier": i, "threads_arrived": threads,
            "threads_expected": expected(m, cta, i), "arrived": names}


def _explain(m, a, waiting) -> str:
    i, want = waiting["named_barrier"], waiting["threads_expected"]
    who = ", ".join(waiting["arrived"]) or "none"
    text = (f"waits at named barrier {i} (bar.sync): {waiting['threads_arrived']} of {want} "
            f"threads arrived ({who})")
    capacity = _all_threads(m, m.agent_cta[a], live=False)
    if want is not None and want > capacity:
        text += (f"; the CTA has {capacity} threads, so no set of agents can meet a count of "
                 f"{want}")
    return text


def _snapshot(m) -> dict:
    if ARRIVED not in m.hidden:
        return {}
    out = []
    for cta in range(m.program.cluster):
        for i in range(IDS):
            threads, names = arrived(m, cta, i)
            if names:
                out.append({"cta": cta, "id": i, "threads_arrived": threads,
                            "threads_expected": expected(m, cta, i), "arrived": names})
    return {"named_barriers": out}


def _isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax block of
    PTX 9.1 section 9.7.13.1."""
    aligned = Slot("aligned", ("aligned",),
                   note="all threads of the CTA execute the same instruction: an agent's warp "
                        "(or its lanes) does")
    sync = ("arrives (32 threads per warp) and waits until the barrier's count is reached; "
            "then it is reinitialized")
    arrive = "arrives (32 threads per warp) and goes on; `b`, the thread count, is required"
    forms = []
    for head in ("bar", "bar.cta", "barrier", "barrier.cta"):
        slots = (aligned,) if head.startswith("barrier") else ()
        forms.append(Form(f"{head}.sync", "bar_sync", "a {, b}", "9.7.13.1",
                          sync + ("" if slots else " (`.aligned` implied)"), slots))
        forms.append(Form(f"{head}.arrive", "bar_arrive", "a, b", "9.7.13.1",
                          arrive + ("" if slots else " (`.aligned` implied)"), slots))
    for head in ("bar", "bar.cta", "barrier", "barrier.cta"):
        forms.append(Gap(f"{head}.red", "9.7.13.1",
                         f"`{head}.red` (a barrier with a reduction) is not modelled yet",
                         f"`{head}.sync` synchronizes the same threads"))
    return tuple(forms)


FAMILY = Family(
    FAMILY_NAME, 50, {"bar_sync": _sync, "bar_arrive": _arrive_only}, {"bar_sync": _ready},
    {"bar_sync": _waiting}, explain={"bar_sync": _explain}, snapshot=_snapshot,
    registers=(ARRIVED, COUNT, PARKED), slots=lambda program: IDS * program.cluster, exits=True,
    forms=_isa_forms(), writes_smem=frozenset())
