"""The pipeline language's syntax: the Lark grammar (pipeline.lark) and a transformer that turns
its tree into small frozen dataclasses, each carrying where it stands in the text."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput

from .syntax_errors import explain

GRAMMAR = Path(__file__).with_name("pipeline.lark")


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


def _pos(meta) -> Pos:
    if getattr(meta, "empty", True):
        return Pos(1, 1)
    return Pos(meta.line, meta.column, meta.start_pos, meta.end_pos)


def _tpos(token: Token) -> Pos:
    return Pos(token.line, token.column, token.start_pos, token.end_pos)


def _string(token: Token) -> str:
    body = str(token)[1:-1]
    return body.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")


def _int(token: Token) -> int:
    text = str(token).replace("_", "")
    return int(text, 16) if text.startswith("0x") else int(text)


@v_args(meta=True)
class ToAst(Transformer):
    """Lark tree -> the dataclasses above."""

    def start(self, meta, items):
        return Module(tuple(items))

    def signed(self, meta, children):
        return _int(children[0])

    def negative(self, meta, children):
        return -_int(children[0])

    def param(self, meta, children):
        name, default, low, high, *doc = children
        return Param(str(name), default, low, high, _string(doc[0]) if doc else "", _pos(meta))

    def dims(self, meta, children):
        return children[0] if children else None

    def release(self, meta, children):
        return str(children[0])

    def init(self, meta, children):
        return children[0]

    def tensor(self, meta, children):
        name, dim, nbytes = children
        return Array("tensor", str(name), dim, bytes=nbytes, pos=_pos(meta))

    def tensor_map(self, meta, children):
        name, shape, box, elem = children
        return Array("tensor", str(name), None, bytes=elem, pos=_pos(meta), shape=shape,
                     box=box)

    def vector(self, meta, children):
        return Vector(tuple(children), _pos(meta))

    def smem(self, meta, children):
        name, dim, nbytes, chunk, *rest = children
        release = next((r for r in rest if isinstance(r, str)), None)
        at = next((r[1] for r in rest if isinstance(r, tuple)), None)
        return Array("smem", str(name), dim, bytes=nbytes, chunk=chunk, release=release,
                     pos=_pos(meta), at=at)

    def view(self, meta, children):
        return ("at", str(children[0]))

    def barrier(self, meta, children):
        name, dim, *init = children
        return Array("barrier", str(name), dim, init=init[0] if init else None, pos=_pos(meta))

    def tmem(self, meta, children):
        return Array("tmem", str(children[0]), None, pos=_pos(meta))

    def agent(self, meta, children):
        name, dim, *shape, body = children
        shape = dict(shape)
        return Agent(str(name), dim, body, _pos(meta), shape.get("warps"), shape.get("lanes"))

    def warps(self, meta, children):
        return ("warps", children[0])

    def lanes(self, meta, children):
        return ("lanes", children[0])

    def names(self, meta, children):
        return tuple(str(c) for c in children)

    def helper(self, meta, children):
        name, *rest = children
        params = rest[0] if len(rest) == 2 else ()
        return Helper(str(name), params, rest[-1], _pos(meta))

    def requires(self, meta, children):
        return (children[0], _string(children[1]) if len(children) > 1 else "")

    def scope(self, meta, children):
        return (str(children[0]), children[1] if len(children) > 1 else None)

    def replace(self, meta, children):
        scope, element = children[0] if len(children) == 3 else (None, None)
        return Patch(scope, _string(children[-2]), _string(children[-1]), _pos(meta), element)

    def delete(self, meta, children):
        scope, element = children[0] if len(children) == 2 else (None, None)
        return Patch(scope, _string(children[-1]), "", _pos(meta), element)

    def bug(self, meta, children):
        name, doc, *rest = children
        requires, requires_doc = (None, "")
        if rest and isinstance(rest[0], tuple):
            requires, requires_doc = rest.pop(0)
        return Bug(str(name), _string(doc), requires, requires_doc, tuple(rest), _pos(meta))

    def block(self, meta, children):
        return tuple(children)

    def int_type(self, meta, children):
        return ("int", None)

    def state_type(self, meta, children):
        token = children[0]
        stages = Num(_int(token), _tpos(token)) if token.type == "INT" else Name(str(token),
                                                                                  _tpos(token))
        return ("PipelineState", stages)

    def decl(self, meta, children):
        (kind, stages), name, dim, *init = children
        return Decl(kind, stages, str(name), init[0] if init else None, _pos(meta), dim)

    def array_init(self, meta, children):
        return ArrayInit(children[0] if children else (), _pos(meta))

    def for_stmt(self, meta, children):
        var, init, cond, update, body = children
        return For(str(var), init, cond, update, body, _pos(meta))

    def while_stmt(self, meta, children):
        cond, body = children
        return While(cond, body, _pos(meta))

    def if_stmt(self, meta, children):
        cond, then, *orelse = children
        return If(cond, then, orelse[0] if orelse else (), _pos(meta))

    def instr(self, meta, children):
        opcode, *operands = children
        return Instr(str(opcode), tuple(operands), _pos(meta))

    def args(self, meta, children):
        return tuple(children)

    def call(self, meta, children):
        name, *args = children
        return Call(str(name), args[0] if args else (), _pos(meta))

    def address(self, meta, children):
        return Address(children[0], _pos(meta))

    def tensor_coords(self, meta, children):
        return TensorCoords(children[0], children[1], _pos(meta))

    def operand(self, meta, children):
        return children[0]

    def lvalue(self, meta, children):
        name, *rest = children
        index = rest.pop(0) if rest and not isinstance(rest[0], Token) else None
        return (str(name), str(rest[0]) if rest else None, index)

    def incr(self, meta, children):
        name, field, index = children[0]
        return Simple((name, field), "++", None, _pos(meta), index)

    def decr(self, meta, children):
        name, field, index = children[0]
        return Simple((name, field), "--", None, _pos(meta), index)

    def assign(self, meta, children):
        (name, field, index), op, value = children
        return Simple((name, field), str(op), value, _pos(meta), index)

    def method(self, meta, children):
        """`s.advance(n)`: a PipelineState's method, an update like `++s`."""
        name, method, value = children
        return Simple((str(name), None), f".{method}", value, _pos(meta))

    def assign_plain(self, meta, children):
        (name, field, index), value = children
        return Simple((name, field), "=", value, _pos(meta), index)

    def binop(self, meta, children):
        left, op, right = children
        return BinOp(str(op), left, right, _pos(meta))

    def ternary(self, meta, children):
        test, then, orelse = children
        return Cond(test, then, orelse, _pos(meta))

    def unop(self, meta, children):
        op, operand = children
        return UnOp(str(op), operand, _pos(meta))

    def number(self, meta, children):
        return Num(_int(children[0]), _tpos(children[0]))

    def name(self, meta, children):
        return Name(str(children[0]), _tpos(children[0]))

    def index(self, meta, children):
        base, index = children
        return Index(base, index, _pos(meta))

    def field(self, meta, children):
        base, name = children
        return Field(base, str(name), _pos(meta))

    def ctor(self, meta, children):
        return Ctor(str(children[0]), _tpos(children[0]))

    def func(self, meta, children):
        return Func(str(children[0]), tuple(children[1]), _pos(meta))

    def cluster(self, meta, children):
        return Cluster(tuple(children), _pos(meta))

    def registers(self, meta, children):
        return Registers(children[0], _pos(meta))


@cache
def _parser() -> Lark:
    return Lark(GRAMMAR.read_text(), parser="lalr", propagate_positions=True,
                maybe_placeholders=False)


def parse(text: str) -> Module:
    """Parse a pipeline text; a `PipelineError` says where and what was expected."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise explain(text, err, _parser()) from None
    return ToAst().transform(tree)
