"""The pipeline language's syntax: the Lark grammar (pipeline.lark) and a transformer that turns
its tree into the syntax tree's frozen dataclasses (tree.py, re-exported here)."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from functools import cache
from pathlib import Path

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput

from .syntax_errors import explain
from .tree import (  # the nodes, importable from here as before
    Address,
    Agent,
    Array,
    ArrayInit,
    BinOp,
    Bug,
    Call,
    Cluster,
    Cond,
    Ctor,
    Decl,
    Field,
    For,
    Func,
    Helper,
    If,
    Index,
    Instr,
    Module,
    Name,
    Num,
    Param,
    Patch,
    Pos,
    Registers,
    Simple,
    TensorCoords,
    UnOp,
    Vector,
    While,
)

GRAMMAR = Path(__file__).with_name("pipeline.lark")


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
    """Lark tree -> the syntax tree (tree.py)."""

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
    return build_parser(cache_dir())


def cache_dir() -> Path | None:
    """Where the parser's tables are kept: `MBI_CACHE_DIR`, else the user's cache directory
    (`XDG_CACHE_HOME` or ~/.cache) under mbarrier-inspector; None where there is no home."""
    if os.environ.get("MBI_CACHE_DIR"):
        return Path(os.environ["MBI_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "mbarrier-inspector"
    try:
        return Path.home() / ".cache" / "mbarrier-inspector"
    except RuntimeError:  # no home directory to be found
        return None


def build_parser(directory: Path | None) -> Lark:
    """The LALR parser. Building its tables takes 0.1-0.15 s in every process that parses (a
    command-line run, each worker of the server), so they are kept in `directory` (Lark's own
    `save`/`load`), named by the grammar, Lark's version and Python's, and written whole or not
    at all (a temporary file renamed): a file that is missing, torn or unreadable is rebuilt."""
    text = GRAMMAR.read_text()
    path = None
    if directory is not None:
        digest = hashlib.sha256(f"{text}{lark.__version__}{sys.version_info[:2]}".encode())
        path = directory / f"grammar-{digest.hexdigest()[:16]}.lark"
        try:
            with path.open("rb") as f:
                return Lark.load(f)
        except Exception:  # noqa: BLE001 - any failure to load means: build it again
            pass
    parser = Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=False)
    if path is not None:
        temporary = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=directory, suffix=".tmp", delete=False) as f:
                temporary = f.name
                parser.save(f)
            os.replace(temporary, path)
        except OSError:  # a read-only or full disk: parse without the cache
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
    return parser


def parse(text: str) -> Module:
    """Parse a pipeline text; a `PipelineError` says where and what was expected."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise explain(text, err, _parser()) from None
    return ToAst().transform(tree)


__all__ = [
    "GRAMMAR", "ToAst", "parse", "Address", "Agent", "Array", "ArrayInit", "BinOp", "Bug",
    "Call", "Cluster", "Cond", "Ctor", "Decl", "Field", "For", "Func", "Helper", "If", "Index",
    "Instr", "Module", "Name", "Num", "Param", "Patch", "Pos", "Registers", "Simple",
    "TensorCoords", "UnOp", "Vector", "While",
]
