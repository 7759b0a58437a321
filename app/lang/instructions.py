"""The PTX instructions a pipeline may use, each turned into one engine `Line`.

The opcode is read against the instruction table (app/lang/opcodes.py: the forms each family of
app/sim registers), which fills `Line.sem` / `Line.scope` with PTX's defaults and `Line.flags`
with the modelled modifiers; the operands are then read in the form's order by the reader of its
line kind. The opcode stays in the trace as written. docs/language.md lists every form.

A new instruction is lowered in three places: its opcode's head in `OPCODE` of pipeline.lark
(if the head is new), its `Form` row in its family's `FAMILY.forms` in app/sim/families (which
also registers the line handler of its kind), and its operand reader under that kind in its
family's table below (`MBARRIER`, `BULK_COPIES`, ...; a new family adds its own to `READERS`).
"""

from __future__ import annotations

from app.sim.program import SINK, WAIT_BLOCKS, WAIT_TEST, Expr, Line

from . import async_readers, opcodes
from .exprs import Scope, compile_expr
from .operands import Operands
from .syntax import Address, BinOp, Name

ORDERING = ("release", "acquire", "relaxed")
"""The `.sem` values that `Line.sem` carries (`.weak` loads and stores carry None)."""


def build(instr, scope: Scope, arrays: dict, text: str) -> Line:
    """The engine line for one instruction statement."""
    parsed = opcodes.parse(instr.opcode, instr.pos.line, instr.pos.column)
    form = parsed.form
    ops = Operands(instr, parsed, scope, arrays)
    args = READERS[form.kind](ops)
    ops.done()
    sem = parsed.value("sem")
    return Line(form.kind, instr.opcode, text, instr.pos.line, args,
                sem if sem in ORDERING else None, parsed.value("scope"), frozenset(form.flags))


def _no_complete(o: Operands) -> bool:
    return "noComplete" in o.parsed.form.flags


def _arrive(o: Operands) -> tuple:
    dest = o.optional_dest()
    ref = o.ref("barrier")[0]
    o.remote_sink(ref, None)
    if _no_complete(o) and not o.items:
        raise o.error(f"`{o.parsed.form.stem}` takes its `count` (PTX 9.7.13.15.13: `state, "
                      "[addr], count`)")
    count = o.value("the count") if o.items else None
    return (dest, ref, count)


def _arrive_expect_tx(o: Operands) -> tuple:
    dest = o.optional_dest()
    ref = o.ref("barrier")[0]
    o.remote_sink(ref, None)
    return (dest, ref, o.value("txCount"))


def _wait(parity: bool):
    def read(o: Operands) -> tuple:
        blocking = o.parsed.form.stem.startswith("mbarrier.try_wait")
        dest = o.optional_dest()
        ref = o.ref("barrier")[0]
        third = o.value("the phase parity") if parity else _token(o)
        hint = None
        if blocking and o.items:
            hint = o.value("the `suspendTimeHint` (nanoseconds)")
        # a try_wait whose answer the program branches on may also fail: agents.py decides
        return (dest, ref, third, WAIT_BLOCKS if blocking else WAIT_TEST, hint)
    return read


def _token(o: Operands) -> int:
    node = o.items.pop(0) if o.items else None
    if not isinstance(node, Name) or node.name not in o.scope.registers:
        stem = o.parsed.form.stem
        hint = None
        if not isinstance(node, (Name, Address)) and node is not None:
            hint = f"a number is a phase parity: did you mean `{stem}.parity`?"
        raise o.error("expected the state register an arrive wrote", node, hint=hint)
    return o.scope.registers[node.name]


def _cache_policy(o: Operands) -> None:
    """`.L2::cache_hint`'s `cache-policy` operand: a performance hint only (PTX 9.7.9.25.4.1),
    which changes nothing the engine observes; read (so its names are checked) and dropped."""
    if o.parsed.get("level::cache_hint"):
        o.value("the `cache-policy` operand of `.L2::cache_hint`")


def _load(o: Operands) -> tuple:
    nodes = list(o.items)
    dst, offset = o.ref("smem", allow_offset=True)
    src, src_offset = o.ref("tensor", allow_offset=True)
    size = o.value("the byte count")
    bar = o.ref("barrier")[0]
    multicast = o.multicast(dst, bar, (nodes[0], nodes[3]))
    _cache_policy(o)
    return (dst, offset, src, size, bar, multicast, src_offset)


def _store(o: Operands) -> tuple:
    dst, dst_offset = o.ref("tensor", allow_offset=True)
    src, offset = o.ref("smem", allow_offset=True)
    size = o.value("the byte count")
    _cache_policy(o)
    return (dst, src, offset, size, dst_offset)


def _wait_group(o: Operands) -> tuple:
    node = o.items[0] if o.items else None
    n = o.value("N")
    if n.const is None:
        raise o.error("N is an integer constant (PTX 9.7.9.27.2.2)", node)
    return (n, o.parsed.get("read") is not None)


def _st_global(o: Operands) -> tuple:
    ref = o.ref("tensor")[0]
    value = o.items.pop(0) if o.items else None
    return (ref, value.name if isinstance(value, Name) else None)


MBARRIER = {
    "init": lambda o: (o.ref("barrier")[0], o.value("the arrival count")),
    "inval": lambda o: (o.ref("barrier")[0],),
    "arrive": _arrive,
    "arrive_drop": _arrive,
    "arrive_expect_tx": _arrive_expect_tx,
    "expect_tx": lambda o: (o.ref("barrier")[0], o.value("txCount")),
    "complete_tx": lambda o: (o.ref("barrier")[0], o.value("txCount")),
    "wait_parity": _wait(parity=True),
    "wait_token": _wait(parity=False),
}
"""app/sim/families/sync.py's kinds."""

BULK_COPIES = {
    "load": _load,
    "store": _store,
    "commit_group": lambda o: (),
    "wait_group": _wait_group,
}
"""app/sim/families/copies.py's kinds."""

SMEM = {
    "proxy_fence": lambda o: (),
    "ld_shared": lambda o: (o.dest(), o.ref("smem")[0], o.tile()),
    "st_shared": lambda o: (o.ref("smem")[0], o.tile()),
    "ld_global": lambda o: (o.dest(), o.ref("tensor")[0]),
    "st_global": _st_global,
}
"""app/sim/families/smem.py's kinds."""

TENSOR_CORE = {
    "mma": lambda o: (o.ref("tmem")[0], o.ref("smem")[0], o.tile()),
    "tc_commit": lambda o: (o.ref("barrier")[0],),
    "tc_fence": lambda o: (),
    "tc_ld": lambda o: (o.dest(), o.ref("tmem")[0]),
    "tc_wait_ld": lambda o: (),
}
"""app/sim/families/tensor_core.py's kinds."""

def _named_barrier(o: Operands) -> tuple:
    """`a{, b}`: the barrier 0..15 and the thread count (required for `arrive`)."""
    node = o.items[0] if o.items else None
    bar_id = o.value("the barrier id `a` (0..15)")
    if bar_id.const is not None and not 0 <= bar_id.const <= 15:
        raise o.error(f"a CTA has named barriers 0..15; got {bar_id.const}", node,
                      hint="PTX 9.7.13.1: \"Each CTA instance has sixteen barriers numbered "
                           "0..15\"")
    if not o.items and o.parsed.form.kind == "bar_arrive":
        raise o.error(f"`{o.parsed.form.stem}` takes its thread count `b` (PTX 9.7.13.1: a "
                      "non-zero thread count is required for `arrive`)")
    node = o.items[0] if o.items else None
    count = o.value("the thread count `b`") if o.items else None
    if count is not None and count.const is not None and not (
            0 < count.const <= 1024 and count.const % 32 == 0):
        raise o.error(f"a thread count is a multiple of the warp size (32) up to 1024; got "
                      f"{count.const}", node, hint="PTX 9.7.13.1: \"the value must be a "
                                                   "multiple of warp size\"")
    return (bar_id, count)


RED_OPS = {"popc": 1, "and": 2, "or": 3}
"""app/sim/families/named_barrier.py's `OPS`, by qualifier."""


def _bar_red(o: Operands) -> tuple:
    """`d, a{, b}, {!}c` (`.popc.u32`) or `p, a{, b}, {!}c` (`.and` / `.or` `.pred`): the
    destination, the barrier and count as `bar.sync` reads them, the predicate."""
    op, kind = o.parsed.get("op"), o.parsed.get("type")
    want = "u32" if op == "popc" else "pred"
    if kind != want:
        raise o.error(f"`.red.{op}` writes {'a count' if op == 'popc' else 'a predicate'}: "
                      f"its type is `.{want}`, not `.{kind}`",
                      hint="PTX 9.7.13.1: `bar.red.popc.u32 d, a{, b}, {!}c;`, "
                           "`bar.red.op.pred p, a{, b}, {!}c;` with `.op` `.and` or `.or`")
    if "%laneid" in o.scope.constants:
        raise o.error(f"`{o.parsed.form.stem}` in an agent of `lanes N`: the predicates of its "
                      "lanes N..31, which take part in the reduction, are not modelled",
                      hint="a whole-warp agent (no `lanes`) gives its predicate for each of its "
                           "32 threads")
    o.expect_count(3, 4)
    dest = o.dest()
    pred = compile_expr(o.items.pop(), o.scope)
    return (_named_barrier(o), dest, pred, RED_OPS[op])


NAMED_BARRIERS = {"bar_sync": _named_barrier, "bar_arrive": _named_barrier, "bar_red": _bar_red}
"""app/sim/families/named_barrier.py's kinds."""


def _membermask(o: Operands) -> Expr:
    """A warp's `membermask`, a 32-bit constant naming lanes by bit: any mask in an agent of
    `lanes N` (whose lanes are movers), only the full one (0xffffffff) in a whole-warp agent,
    whose 32 threads move in lockstep, so that threads outside a smaller mask would execute it
    (undefined: "the executing thread is not in the membermask")."""
    node = o.items[0] if o.items else None
    mask = o.value("the membermask")
    section = "9.7.13.14" if o.parsed.form.kind == "elect" else "9.7.13.2"
    if mask.const is None:
        raise o.error("the membermask is a constant here (a 32-bit integer naming lanes by "
                      "bit)", node, hint="write the lanes as a number, `0x3` for lanes 0 and 1")
    if not 0 < mask.const <= 0xFFFFFFFF:
        raise o.error(f"a membermask is a non-zero 32-bit integer; got {mask.const}", node,
                      hint=f"PTX {section}: bit i names lane i, and the executing thread "
                           "must be one of them")
    if mask.const != 0xFFFFFFFF and "%laneid" not in o.scope.constants:
        raise o.error(f"membermask {mask.const:#x} in an agent that is a whole warp: its 32 "
                      "threads move in lockstep, so those outside the mask would execute it "
                      f"(undefined, PTX {section})", node,
                      hint="declare the agent's lanes (`agent NAME lanes N`) and have the "
                           "lanes of the mask execute it, e.g. `if (%laneid < 2) { ... }`")
    return mask


def _elect(o: Operands) -> tuple:
    """`d|p, membermask`: the leader's laneid and the leader predicate (`_` drops either)."""
    node = o.items.pop(0) if o.items else None
    if not (isinstance(node, BinOp) and node.op == "|" and isinstance(node.left, Name)
            and isinstance(node.right, Name)):
        raise o.error("expected `d|p`: the leader's laneid and the leader predicate", node,
                      hint="write `_|is_leader` to keep only the predicate (PTX 9.7.13.14)")
    regs = o.scope.registers
    return (regs.get(node.left.name, SINK), regs.get(node.right.name, SINK), _membermask(o))


WARP = {"elect": _elect, "warp_sync": lambda o: (_membermask(o),)}
"""app/sim/families/warp.py's kinds."""

CLUSTER_BARRIER = {"cluster_arrive": lambda o: (), "cluster_wait": lambda o: (),
                   "mbarrier_init_fence": lambda o: ()}
"""app/sim/families/cluster_barrier.py's kinds."""

def _setmaxnreg(o: Operands) -> tuple:
    """`imm-reg-count`: an integer constant, 24..256, a multiple of 8 (PTX 9.7.19.5)."""
    node = o.items[0] if o.items else None
    n = o.value("the register count `imm-reg-count`")
    if n.const is None or not 24 <= n.const <= 256 or n.const % 8:
        raise o.error("`imm-reg-count` is an integer constant in 24..256, a multiple of 8 (PTX "
                      "9.7.19.5)", node)
    return (n, o.parsed.get("action") == "inc")


SETMAXNREG = {"setmaxnreg": _setmaxnreg}
"""app/sim/families/setmaxnreg.py's kind."""

READERS = {**MBARRIER, **BULK_COPIES, **SMEM, **TENSOR_CORE, **NAMED_BARRIERS, **WARP,
           **CLUSTER_BARRIER, **SETMAXNREG,
           **async_readers.READERS}
"""The operand reader of every line kind a form names (tests/lang/test_isa.py: one per kind)."""
