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

`bar.red` / `barrier.red` (`.popc.u32`, `.and.pred`, `.or.pred`) arrive and wait as `sync` does,
each giving its predicate `c`; when the barrier completes, "the c predicate (or its complement)
from all threads ... are combined" and "the final value is written to the destination register
in all threads waiting at the barrier": `.popc` the number of threads whose predicate is true,
`.and` / `.or` whether all / any are. A whole-warp agent's threads share its registers, so a warp
gives its predicate for each of its 32 x `warps` threads (the language refuses `bar.red` in a
`lanes` agent, whose lanes N..31 are not modelled). "`barrier{.cta}.red` should not be
intermixed with `barrier{.cta}.sync` or `barrier{.cta}.arrive` using the same active barrier.
Execution in this case is unpredictable": such a use, or one that mixes reduction operators, is
undefined behaviour here (`bar_red_mixed`).

The state is four hidden registers per agent (its arrivals and the count it gave, per barrier,
the barrier a `sync` or `red` is parked on, and per barrier the reduction operator and predicate
it gave); what a barrier holds is derived from them, and what its arrivals released is one
knowledge slot per (CTA, barrier).
"""

from __future__ import annotations

from ..barrier import UndefinedBehavior
from ..core import PC, operand_range
from ..family import STAY, Family
from ..isa import Form, Slot
from ..program import SINK, ProgramError

IDS = 16
ARRIVED, COUNT, PARKED, RED = "%bar_arrived", "%bar_count", "%bar_parked", "%bar_red"
A_BITS, C_BITS, R_BITS = 8, 12, 3
OPS = {1: "popc", 2: "and", 3: "or"}
"""A reduction's operator as the low two of its 3 bits per barrier (0: not a `red` arrival);
the third bit is the predicate it gave."""
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


def _arrive(m, a, r, args, record, sync: bool, red: tuple[int, int] | None = None):
    """An arrival; `red` is a reduction's (operator, predicate)."""
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
    r_reg = m.hidden.get(RED)
    for _, movers in _warps(m, cta):
        for x in movers:
            other = _get(m.regs[x][c_reg], i, C_BITS)
            if other and other != mine:
                raise UndefinedBehavior("bar_count_mismatch", (
                    f"{m.agents[a].name} arrived at named barrier {i} with {_count(mine)} while "
                    f"{m.agents[x].name}'s arrival in the same use gave {_count(other)}: PTX "
                    "9.7.13.1 has the warps of one use name the same barrier and thread count"))
            if other and r_reg is not None:
                _check_mixed(m, a, x, i, red)
    r[a_reg] = _put(r[a_reg], i, A_BITS, _get(r[a_reg], i, A_BITS) + 1)
    r[c_reg] = _put(r[c_reg], i, C_BITS, mine)
    if red is not None:
        r[r_reg] = _put(r[r_reg], i, R_BITS, red[0] | red[1] << 2)
    m.carried[_slot(m, cta, i)] |= m.know[a]
    threads, names = arrived(m, cta, i)
    want = expected(m, cta, i)
    record["operands"] = {"named_barrier": i, "count": n, "threads_arrived": threads,
                          "threads_expected": want}
    event = {"kind": "bar_arrive", "named_barrier": i, "agent": m.agents[a].name,
             "threads_arrived": threads, "threads_expected": want}
    if red is not None:
        record["operands"]["reduction"] = event["reduction"] = OPS[red[0]]
        record["operands"]["predicate"] = event["predicate"] = red[1]
    record["events"].append(event)
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
    reduced = _reduce(m, cta, i)
    event = {"kind": "bar_completed", "named_barrier": i, "restarted": []}
    if reduced is not None:
        event["reduction"] = {"op": OPS[reduced[0]], "value": reduced[1]}
        for _, movers in _warps(m, cta):  # "written to the destination register in all
            for x in movers:              # threads waiting at the barrier"
                if m.regs[x][parked] == i + 1 or (x == a and sync):
                    dest = m.code[x].prepared[m.regs[x][PC]][1]
                    if dest != SINK:
                        m.regs[x][dest] = reduced[1]
    for _, movers in _warps(m, cta):
        for x in movers:
            r = m.regs[x]
            r[a_reg] = _put(r[a_reg], i, A_BITS, 0)
            r[c_reg] = _put(r[c_reg], i, C_BITS, 0)
            if RED in m.hidden:
                r[m.hidden[RED]] = _put(r[m.hidden[RED]], i, R_BITS, 0)
            if r[parked] == i + 1 and x != a:
                r[parked] = 0
                m.know[x] |= released
                event["restarted"].append(m.agents[x].name)
                m.advance(x)
    if sync:
        m.regs[a][parked] = 0
        m.know[a] |= released
    record["events"].append(event)


def _check_mixed(m, a: int, x: int, i: int, red: tuple[int, int] | None) -> None:
    """`x` arrived in this use of barrier `i`: a reduction beside a plain arrival, or two
    operators, is the use PTX calls unpredictable."""
    theirs = _get(m.regs[x][m.hidden[RED]], i, R_BITS) & 3
    ours = 0 if red is None else red[0]
    if theirs == ours:
        return
    def spell(op: int) -> str:
        return f"bar.red.{OPS[op]}" if op else "bar.sync / bar.arrive"
    raise UndefinedBehavior("bar_red_mixed", (
        f"{m.agents[a].name} arrived at named barrier {i} with {spell(ours)} while "
        f"{m.agents[x].name}'s arrival in the same use was {spell(theirs)}: PTX 9.7.13.1 says "
        "`.red` \"should not be intermixed with barrier{.cta}.sync or barrier{.cta}.arrive "
        "using the same active barrier\" (and a use combines one operator)"))


def _reduce(m, cta: int, i: int) -> tuple[int, int] | None:
    """(operator, value) of the reduction of barrier `i`'s current use, if it is one: each
    arrived warp gives its predicate for each of its threads."""
    if RED not in m.hidden:
        return None
    reg, a_reg = m.hidden[RED], m.hidden[ARRIVED]
    op, trues, threads = 0, 0, 0
    for w, movers in _warps(m, cta):
        for x in movers:
            bits = _get(m.regs[x][reg], i, R_BITS)
            if bits & 3 and _get(m.regs[x][a_reg], i, A_BITS):
                op = bits & 3
                n = 32 * m.agents[w].warps
                threads += n
                trues += n if bits >> 2 else 0
    if not op:
        return None
    value = {1: trues, 2: int(trues == threads), 3: int(trues > 0)}[op]
    return op, value


def _sync(m, a, r, args, record):
    return _arrive(m, a, r, args, record, True)


def _arrive_only(m, a, r, args, record):
    return _arrive(m, a, r, args, record, False)


def _red(m, a, r, args, record):
    """`bar.red.op d, a{, b}, {!}c`: args are ((a, b), d, c, operator)."""
    barrier, _dest, pred, op = args
    return _arrive(m, a, r, barrier, record, True, (op, int(bool(pred(r)))))


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
    what = "bar.red" if m.current_line(a).kind == "bar_red" else "bar.sync"
    text = (f"waits at named barrier {i} ({what}): {waiting['threads_arrived']} of {want} "
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
    red = ("arrives and waits as `sync` does, giving its predicate `c` for the warp's threads; "
           "at completion every waiting thread's `d` (`p`) gets the number of threads whose "
           "`c` is true (`.popc.u32`), or whether all (`.and.pred`) or any (`.or.pred`) are")
    ops = (Slot("op", ("popc", "and", "or"), required=True),
           Slot("type", ("u32", "pred"), required=True,
                note="`.popc` writes a `.u32` count, `.and` and `.or` a `.pred`"))
    for head in ("bar", "bar.cta", "barrier", "barrier.cta"):
        slots = (aligned,) if head.startswith("barrier") else ()
        forms.append(Form(f"{head}.red", "bar_red", "d|p, a {, b}, {!}c", "9.7.13.1",
                          red + ("" if slots else " (`.aligned` implied)"), ops + slots))
    return tuple(forms)


FAMILY = Family(
    FAMILY_NAME, 50, {"bar_sync": _sync, "bar_arrive": _arrive_only, "bar_red": _red},
    {"bar_sync": _ready, "bar_red": _ready}, {"bar_sync": _waiting, "bar_red": _waiting},
    explain={"bar_sync": _explain, "bar_red": _explain}, snapshot=_snapshot,
    registers=(ARRIVED, COUNT, PARKED, RED), slots=lambda program: IDS * program.cluster,
    exits=True, forms=_isa_forms(), writes_smem=frozenset())
