"""The pipeline language's syntax tree: small frozen dataclasses, each carrying where it stands
in the text (`Pos`). `syntax.py` builds them from Lark's tree; the compiler reads them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Pos:
    line: int
    column: int
    start: int = 0
    end: int = 0


# ------------------------------------------------------------------------------- expressions

@dataclass(frozen=True, slots=True)
class Num:
    value: int
    pos: Pos


@dataclass(frozen=True, slots=True)
class Name:
    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Index:
    base: object
    index: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class Field:
    base: object
    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str
    left: object
    right: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class UnOp:
    op: str
    operand: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class Cond:
    """C's `test ? then : orelse`."""

    test: object
    then: object
    orelse: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class Ctor:
    name: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Func:
    """`mapa(address, cta)`: the same object in another CTA of the cluster."""

    name: str
    args: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class Registers:
    """`registers N;`: the per-thread registers every warp is launched with (`setmaxnreg`
    moves them between warpgroups through the CTA's pool)."""

    value: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class Cluster:
    """`cluster X;` or `cluster X, Y;`: the cluster's shape in CTAs (expressions over
    parameters)."""

    dims: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class Address:
    expr: object
    pos: Pos


@dataclass(frozen=True, slots=True)
class Vector:
    """`{a, b, ...}`: a tensor map's shape or box, or a tensor copy's coordinates."""

    items: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class TensorCoords:
    """`[tensorMap, {c0, c1, ...}]`: a tensor copy's global operand (PTX 9.7.9.27.1.2)."""

    tensor: object
    coords: Vector
    pos: Pos


# -------------------------------------------------------------------------------- statements

@dataclass(frozen=True, slots=True)
class Decl:
    type: str
    stages: object
    name: str
    init: object
    pos: Pos
    dim: object = None
    """`int a[N];`: a register array of N registers `a[0]`..`a[N-1]`."""


@dataclass(frozen=True, slots=True)
class ArrayInit:
    """`{e, ...}`: a register array's values at launch (the rest are 0, as in C)."""

    values: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class Simple:
    """`++x`, `x op= e` or `x = e`: `target` is (name, field or None); `index` the element
    of a register array (`a[i] = e`)."""

    target: tuple[str, str | None]
    op: str
    value: object
    pos: Pos
    index: object = None


@dataclass(frozen=True, slots=True)
class Instr:
    opcode: str
    operands: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class For:
    var: str
    init: object
    cond: object
    update: Simple
    body: tuple
    pos: Pos
    declares: bool = True


@dataclass(frozen=True, slots=True)
class While:
    cond: object
    body: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class If:
    cond: object
    then: tuple
    orelse: tuple
    pos: Pos


# ------------------------------------------------------------------------------ declarations

@dataclass(frozen=True, slots=True)
class Param:
    name: str
    default: int
    low: int
    high: int
    doc: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Array:
    """A `tensor`, `smem`, `barrier` or `tmem` declaration."""

    kind: str
    name: str
    dim: object
    bytes: object = None
    chunk: object = None
    release: str | None = None
    init: object = None
    pos: Pos = Pos(1, 1)
    at: str | None = None
    """`smem o ... at q;`: `o` is another view of `q`'s bytes (a union)."""
    shape: tuple = ()
    """A tensor map's extent in elements per dimension (innermost first), as written."""
    box: tuple = ()
    """A tensor map's bounding box in elements per dimension: one tile is one box."""


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    dim: object
    body: tuple
    pos: Pos
    warps: object = None
    """`warps N`: the agent stands for N warps in lockstep (a warpgroup is `warps 4`)."""
    lanes: object = None
    """`lanes N`: lanes 0..N-1 of the agent's one warp run its code as N movers."""


@dataclass(frozen=True, slots=True)
class Helper:
    name: str
    params: tuple[str, ...]
    body: tuple
    pos: Pos


@dataclass(frozen=True, slots=True)
class Patch:
    scope: str | None
    old: str
    new: str
    pos: Pos
    element: object = None
    """`in consumer[1]`: the one agent of the array the patch applies to."""


@dataclass(frozen=True, slots=True)
class Bug:
    name: str
    doc: str
    requires: object
    requires_doc: str
    patches: tuple[Patch, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Module:
    items: tuple = field(default=())
