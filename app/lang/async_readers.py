"""Operand readers of the asynchronous families (app/sim/families: tensor copies, warpgroup
MMAs, per-thread `cp.async`, `st.async` / `red.async`, bulk reductions): each reads one line's
operands, in its form's order, into the engine's `Line.args`, and refuses at its column what
PTX 9.1's syntax blocks do not allow. `o` is the line's `operands.Operands`."""

from __future__ import annotations

from app.sim.families.st_async import TYPE_BYTES

from .errors import PipelineError
from .syntax import Name


def cache_policy(o) -> None:
    """`.L2::cache_hint`'s `cache-policy` operand: a performance hint only, which changes
    nothing the engine observes; read (so its names are checked) and dropped."""
    if o.parsed.get("level::cache_hint"):
        o.value("the `cache-policy` operand of `.L2::cache_hint`")


def _constant(o, what: str, allowed, section: str):
    node = o.items[0] if o.items else None
    value = o.value(what)
    if value.const is None or value.const not in allowed:
        shown = ", ".join(map(str, allowed)) if len(allowed) < 8 else \
            f"{min(allowed)}..{max(allowed)}"
        raise o.error(f"{what} is an integer constant: {shown} (PTX {section})", node)
    return value


# --------------------------------------------------------------------------- tensor copies

def _tensor_load(o) -> tuple:
    nodes = list(o.items)
    dst = o.ref("smem")[0]
    box, coords = o.tensor_coords()
    bar = o.ref("barrier")[0]
    if o.parsed.get("multicast") and o.parsed.get("dst") != "shared::cluster":
        raise o.error("`.multicast::cluster` lands in other CTAs: the destination is "
                      "`.shared::cluster`", hint="PTX 9.7.9.27.1.2")
    multicast = o.multicast(dst, bar, (nodes[0], nodes[2]))
    cache_policy(o)
    return (dst, box, coords, bar, multicast)


def _tensor_store(o) -> tuple:
    box, coords = o.tensor_coords()
    src = o.ref("smem")[0]
    cache_policy(o)
    return (box, coords, src)



# -------------------------------------------------------------------- warpgroup MMAs

WGMMA_N = {"dense": frozenset(range(8, 257, 8)),
           "int": frozenset((8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208,
                             224)),
           "bit": frozenset((8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208,
                             224, 240, 256))}
WGMMA_TYPES = (  # (A and B types, accumulator types, K, N set, extra qualifiers allowed)
    (("f16",), ("f16", "f32"), 16, "dense", ()),
    (("bf16",), ("f32",), 16, "dense", ()),
    (("tf32",), ("f32",), 8, "dense", ()),
    (("e4m3", "e5m2"), ("f16", "f32"), 32, "dense", ()),
    (("s8", "u8"), ("s32",), 32, "int", ("satfinite",)),
    (("b1",), ("s32",), 256, "bit", ("op", "popc")),
)
"""The type combinations of PTX 9.7.15.5.2's syntax blocks, with each one's shapes."""


def _wgmma_types(o) -> None:
    """Refuse a combination of `.shape` and types that no syntax block of 9.7.15.5.2 has."""
    p = o.parsed
    pos = o.instr.pos

    def fail(slot: str, message: str, hint: str) -> PipelineError:
        return PipelineError(message, pos.line, p.columns.get(slot, pos.column),
                             hint=f"{hint} (PTX 9.7.15.5.2)")

    a, b, d = p.get("atype"), p.get("btype"), p.get("dtype")
    row = next((t for t in WGMMA_TYPES if a in t[0]), None)
    if row is None or b not in row[0]:
        raise fail("btype" if row else "atype", f"`.{a}.{b}`: A and B are not a pair "
                   "`wgmma.mma_async` takes", "A/B: `.f16.f16`, `.bf16.bf16`, `.tf32.tf32`, "
                   "`.e4m3`/`.e5m2`, `.s8`/`.u8`, `.b1.b1`")
    types, accumulators, k, n_set, extra = row
    if d not in accumulators:
        raise fail("dtype", f"`.{d}` is not an accumulator type for `.{a}` inputs",
                   "the accumulator is " + " or ".join(f"`.{x}`" for x in accumulators))
    shape = p.get("shape")
    n, kk = (int(x) for x in shape[len("m64n"):].split("k"))
    if kk != k or n not in WGMMA_N[n_set]:
        raise fail("shape", f"`.{shape}` is not a shape for `.{a}` inputs",
                   f"their shapes are m64nNk{k}")
    for slot in ("satfinite", "op", "popc"):
        if p.get(slot) and slot not in extra:
            raise fail(slot, f"`.{p.get(slot)}` is not a qualifier of a `.{a}` MMA",
                       "`.satfinite` is for integer MMAs, `.and.popc` for `.b1`")
    if extra == ("op", "popc") and not (p.get("op") and p.get("popc")):
        raise fail("atype", "a `.b1` MMA takes `.and.popc`", "write `.b1.b1.and.popc`")


def warpgroup(read):
    """A `wgmma` line's reader: PTX 9.7.15.1: the instruction is executed by all 128 threads of a
    warpgroup (`.sync.aligned`), so its agent is declared as four warps."""
    def checked(o) -> tuple:
        if o.scope.constants.get("%warps", 1) != 4:
            raise o.error(f"`{o.parsed.form.stem}` is a warpgroup's instruction: the agent must "
                          "be four warps", hint="declare it `agent NAME warps 4 { ... }` (PTX "
                                                "9.7.15.1: all threads of the warpgroup execute "
                                                "it)")
        return read(o)
    return checked


def _wgmma_mma(o) -> tuple:
    _wgmma_types(o)
    node = o.items[0] if o.items else None
    if not isinstance(node, Name) or node.name in o.scope.registers or node.name == "_":
        raise o.error("the accumulator `d` is a name of its own (its registers are the MMA's: "
                      "read them with `st.global` after a `wgmma.wait_group`)", node)
    o.items.pop(0)
    if not o.items:
        raise o.error("a shared-memory operand (`[smem[i]], tile[k]`) is missing")
    operands = [(o.ref("smem")[0], o.tile())]
    if o.items:
        operands.append((o.ref("smem")[0], o.tile()))
    return (tuple(operands), node.name)


def _wgmma_wait(o) -> tuple:
    node = o.items[0] if o.items else None
    n = o.value("N")
    if n.const is None or not 0 <= n.const <= 63:
        raise o.error("N is an integer constant, 0..63 (PTX 9.7.15.7.3)", node)
    return (n,)


# ---------------------------------------------------------------------- per-thread cp.async

def _cp_async(o) -> tuple:
    dst, offset = o.ref("smem", allow_offset=True)
    src = o.ref("tensor")[0]
    sizes = (16,) if o.parsed.get("cop") == "cg" else (4, 8, 16)
    size = _constant(o, "cp-size", sizes, "9.7.9.25.3.1: `.cg` copies 16 bytes, `.ca` 4, 8 "
                                          "or 16")
    if o.items and not o.parsed.get("level::cache_hint"):
        raise o.error("`src-size` and `ignore-src` (a copy that fills with zeros) are not "
                      "modelled", o.items[0], hint="the engine tracks which tile each chunk "
                                                   "holds; leave the operand out")
    cache_policy(o)
    return (dst, offset, src, size)


def _cp_async_wait(o) -> tuple:
    if o.parsed.form.stem == "cp.async.wait_all":
        return (None,)
    return (_constant(o, "N", range(64), "9.7.9.25.3.3"),)


def _cp_async_arrive(o) -> tuple:
    return (o.ref("barrier")[0], o.parsed.get("noinc") is not None)


# -------------------------------------------------------------- st.async and red.async

RED_TYPES = {"inc": ("u32",), "dec": ("u32",), "min": ("u32", "s32"), "max": ("u32", "s32"),
             "and": ("b32",), "or": ("b32",), "xor": ("b32",), "add": ("u32", "s32", "u64")}
"""PTX 9.7.13.7: the `.op` / `.type` pairs of the `.mbarrier::complete_tx::bytes` forms."""


def _async_store(red: bool):
    def read(o) -> tuple:
        p = o.parsed
        pos = o.instr.pos
        kind = p.get("type")
        if red and kind not in RED_TYPES[p.get("op")]:
            raise PipelineError(f"`.{p.get('op')}.{kind}` is not a `red.async` reduction",
                                pos.line, p.columns["type"], hint=f"`.{p.get('op')}` takes "
                                + ", ".join(f"`.{t}`" for t in RED_TYPES[p.get("op")])
                                + " (PTX 9.7.13.7)")
        nodes = list(o.items)
        dst, offset = o.ref("smem", allow_offset=True)
        value = o.value("the value") if red else o.tile()
        bar = o.ref("barrier")[0]
        if o.arrays[dst.array].ctas == 1:
            raise o.error(f"`{o.parsed.form.stem}` stores into another CTA's shared memory: the "
                          "program needs a cluster (`cluster N;`)", nodes[0],
                          hint="PTX 9.7.9.12: `%cluster_nctarank > 1`")
        vec = {"v2": 2, "v4": 4}.get(p.get("vec"), 1)
        nbytes = TYPE_BYTES[kind] * vec
        return (dst, offset, value, bar, nbytes)
    return read


# ---------------------------------------------------------------------- bulk reductions

REDUCE_TYPES = {"add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16"),
                "min": ("u32", "s32", "u64", "s64", "f16", "bf16"),
                "max": ("u32", "s32", "u64", "s64", "f16", "bf16"),
                "inc": ("u32",), "dec": ("u32",), "and": ("b32", "b64"), "or": ("b32", "b64"),
                "xor": ("b32", "b64")}
"""PTX 9.7.9.25.4.2: the `.redOp` / `.type` pairs into global memory."""


def _reduce_store(o) -> tuple:
    p = o.parsed
    pos = o.instr.pos
    op, kind = p.get("redOp"), p.get("type")
    if kind not in REDUCE_TYPES[op]:
        raise PipelineError(f"`.{op}.{kind}` is not a bulk reduction into global memory",
                            pos.line, p.columns["type"], hint=f"`.{op}` takes "
                            + ", ".join(f"`.{t}`" for t in REDUCE_TYPES[op])
                            + " (PTX 9.7.9.25.4.2)")
    if (kind in ("f16", "bf16") and op == "add") != bool(p.get("noftz")):
        raise PipelineError("`.noftz` goes with `.add.f16` and `.add.bf16`, and only there",
                            pos.line, p.columns.get("noftz", p.columns["type"]),
                            hint="PTX 9.7.9.25.4.2")
    dst = o.ref("tensor")[0]
    src, offset = o.ref("smem", allow_offset=True)
    size = o.value("the byte count")
    cache_policy(o)
    return (dst, src, offset, size)


READERS = {
    "tensor_load": _tensor_load,
    "tensor_store": _tensor_store,
    "wgmma_fence": warpgroup(lambda o: ()),
    "wgmma_mma": warpgroup(_wgmma_mma),
    "wgmma_commit": warpgroup(lambda o: ()),
    "wgmma_wait": warpgroup(_wgmma_wait),
    "cp_async": _cp_async,
    "cp_async_commit": lambda o: (),
    "cp_async_wait": _cp_async_wait,
    "cp_async_arrive": _cp_async_arrive,
    "st_async": _async_store(red=False),
    "red_async": _async_store(red=True),
    "reduce_store": _reduce_store,
}
"""The readers of the asynchronous families' kinds (instructions.READERS takes them in)."""
