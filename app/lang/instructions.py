"""The PTX instructions a pipeline may use, each turned into one engine `Line`.

An opcode is read by its parts, in PTX order: `mbarrier.try_wait.parity.shared::cta.b64` is a
`try_wait` with `.parity`; state-space, scope, semantics and type suffixes are accepted and kept in
the trace's spelling. docs/language.md lists every instruction and what the engine does with it.
"""

from __future__ import annotations

from app.sim.program import SINK, Expr, Line, Ref

from .errors import PipelineError
from .exprs import Scope, compile_expr
from .syntax import Address, BinOp, Func, Index, Name

QUALIFIERS = {"shared", "shared::cta", "shared::cluster", "b64", "b32", "release", "acquire",
              "relaxed", "cta", "cluster", "sync", "aligned"}


class Operands:
    """The operands of one instruction, read left to right with messages that name the form."""

    def __init__(self, instr, form: str, scope: Scope, arrays: dict):
        self.items = list(instr.operands)
        self.instr = instr
        self.form = form
        self.scope = scope
        self.arrays = arrays

    def error(self, message: str, node=None) -> PipelineError:
        pos = getattr(node, "pos", None) or self.instr.pos
        return PipelineError(message, pos.line, pos.column,
                             hint=f"the form is `{self.instr.opcode} {self.form};`")

    def expect_count(self, low: int, high: int) -> None:
        n = len(self.items)
        if not low <= n <= high:
            want = str(low) if low == high else f"{low} to {high}"
            raise self.error(f"`{self.instr.opcode}` takes {want} operands; got {n}")

    def dest(self) -> int:
        """A destination register, or SINK for `_` and names that are not registers."""
        node = self.items.pop(0)
        if isinstance(node, Name):
            return self.scope.registers.get(node.name, SINK)
        raise self.error("expected a destination register (or `_`)", node)

    def optional_dest(self) -> int:
        """PTX's optional first operand (`state`, `waitComplete`): anything not in brackets."""
        if self.items and not isinstance(self.items[0], Address):
            return self.dest()
        return SINK

    def ref(self, kind: str, allow_offset: bool = False) -> tuple[Ref, object]:
        """An operand `[array[i]]` (or `[array]`) of the declared `kind`."""
        if not self.items:
            raise self.error(f"a {kind} operand is missing")
        node = self.items.pop(0)
        if not isinstance(node, Address):
            raise self.error(f"expected a {kind} in brackets, like `[{self._example(kind)}]`",
                             node)
        return self._ref(node.expr, kind, node, allow_offset)

    def tile(self) -> Ref:
        """The tile a read expects to find: `tensor[i]`, no brackets."""
        if not self.items:
            raise self.error("the tile this read expects is missing (like `tile[k]`)")
        node = self.items.pop(0)
        if isinstance(node, Address):
            raise self.error("name the expected tile without brackets, like `tile[k]`", node)
        ref, _ = self._ref(node, "tensor", node, False)
        return ref

    def value(self, what: str):
        if not self.items:
            raise self.error(f"{what} is missing")
        node = self.items.pop(0)
        if isinstance(node, Address):
            raise self.error(f"{what} is a number, not a `[...]` operand", node)
        return compile_expr(node, self.scope)

    def _ref(self, expr, kind: str, node, allow_offset: bool) -> tuple[Ref, object]:
        offset = None
        if allow_offset and isinstance(expr, BinOp) and expr.op == "+":
            expr, offset = expr.left, compile_expr(expr.right, self.scope)
        remote = None
        if isinstance(expr, Func):
            if expr.name != "mapa" or len(expr.args) != 2:
                raise self.error(f"`{expr.name}(...)`: the one address function is "
                                 "`mapa(object, cta)`, the object in another CTA", node)
            expr, remote = expr.args[0], compile_expr(expr.args[1], self.scope)
        if isinstance(expr, Name):
            name, index = expr.name, None
        elif isinstance(expr, Index) and isinstance(expr.base, Name):
            name, index = expr.base.name, expr.index
        else:
            raise self.error(f"expected a {kind} like `[{self._example(kind)}]`", node)
        decl = self.arrays.get(name)
        if decl is None:
            raise self.scope.unknown(name, expr.pos)
        if decl.kind != kind:
            raise self.error(f"`{name}` is a {decl.kind}; this operand is a {kind}", node)
        if index is None:
            if decl.size != 1 or decl.indexed:
                raise self.error(f"`{name}` is an array of {decl.size}; write `{name}[i]`",
                                 node)
            index_expr = Expr("0", "0", 0)
        else:
            if not decl.indexed:
                raise self.error(f"`{name}` is not an array", node)
            index_expr = compile_expr(index, self.scope)
            if index_expr.const is not None and not 0 <= index_expr.const < decl.size:
                raise self.error(f"`{name}[{index_expr.const}]` is out of range: `{name}` has "
                                 f"{decl.size} element(s)", node)
        if remote is not None and decl.ctas == 1:
            raise self.error(f"`mapa`: `{name}` is not in shared memory of a cluster (declare "
                             "`cluster N;`)", node)
        own = self.scope.constants.get("cta", 0) if decl.ctas > 1 else 0
        if remote is not None:
            return Ref(name, decl.base, decl.size, index_expr, remote, decl.ctas), offset
        return Ref(name, decl.base + own * decl.size, decl.size, index_expr), offset

    def done(self) -> None:
        if self.items:
            raise self.error("too many operands", self.items[0])

    @staticmethod
    def _example(kind: str) -> str:
        return {"barrier": "full_barrier[i]", "smem": "smem[i]", "tensor": "tile[k]",
                "tmem": "tmem_acc"}[kind]


def parts(opcode: str) -> list[str]:
    return opcode.split(".")


def build(instr, scope: Scope, arrays: dict, text: str) -> Line:
    """The engine line for one instruction statement."""
    p = parts(instr.opcode)
    head = p[0]
    words = [w for w in p[1:] if w not in QUALIFIERS]
    line = instr.pos.line

    def make(kind: str, form: str, reader) -> Line:
        ops = Operands(instr, form, scope, arrays)
        args = reader(ops)
        ops.done()
        sem, scope_q, flags = _ordering(kind, p)
        return Line(kind, instr.opcode, text, line, args, sem, scope_q, flags)

    if head == "mbarrier":
        return _mbarrier(instr, words, make)
    if head == "cp" and words[:2] == ["async", "bulk"]:
        return _bulk(instr, p, words[2:], make)
    if head == "fence" and words[:2] == ["proxy", "async"]:
        return make("proxy_fence", "", lambda o: ())
    if head == "tcgen05":
        return _tcgen05(instr, words, make)
    if head == "ld" and "shared" in instr.opcode:
        return make("ld_shared", "dest, [smem[i]], tile[k]",
                    lambda o: (o.dest(), o.ref("smem")[0], o.tile()))
    if head == "st" and "shared" in instr.opcode:
        return make("st_shared", "[smem[i]], tile[k]",
                    lambda o: (o.ref("smem")[0], o.tile()))
    if head == "st" and "global" in instr.opcode:
        return make("st_global", "[tensor[k]], value", _st_global)
    if head == "ld" and "global" in instr.opcode:
        return make("ld_global", "dest, [tensor[k]]", lambda o: (o.dest(), o.ref("tensor")[0]))
    raise _unknown(instr)


_RELEASING = {"arrive", "arrive_drop", "arrive_expect_tx"}
_ACQUIRING = {"wait_parity", "wait_token"}


def _ordering(kind: str, p: list[str]) -> tuple[str | None, str | None, frozenset]:
    """`.sem` and `.scope` with PTX's defaults (arrive: `.release.cta`; waits: `.acquire.cta`),
    and the modelled flags."""
    words = set(p[1:])
    flags = frozenset(w for w in ("noComplete",) if w in words)
    if kind in _RELEASING or kind in _ACQUIRING:
        default = "release" if kind in _RELEASING else "acquire"
        sem = next((w for w in ("release", "acquire", "relaxed") if w in words), default)
        scope = "cluster" if "cluster" in words else "cta"
        return sem, scope, flags
    return None, None, flags


def _st_global(o: Operands) -> tuple:
    ref = o.ref("tensor")[0]
    if o.items:
        o.items.pop(0)
    return (ref,)


def _mbarrier(instr, words: list[str], make) -> Line:
    w = set(words)
    if "init" in w:
        return make("init", "[barrier], count",
                    lambda o: (o.ref("barrier")[0], o.value("the arrival count")))
    if "arrive" in w and "expect_tx" in w:
        return make("arrive_expect_tx", "state, [barrier], bytes",
                    lambda o: (o.optional_dest(), o.ref("barrier")[0], o.value("bytes")))
    if "arrive" in w or "arrive_drop" in w:
        kind = "arrive_drop" if "arrive_drop" in w else "arrive"

        def read(o):
            dest = o.optional_dest()
            ref = o.ref("barrier")[0]
            count = o.value("the count") if o.items else None
            return (dest, ref, count)
        return make(kind, "state, [barrier], count", read)
    if "expect_tx" in w:
        return make("expect_tx", "[barrier], bytes",
                    lambda o: (o.ref("barrier")[0], o.value("bytes")))
    if "complete_tx" in w:
        return make("complete_tx", "[barrier], bytes",
                    lambda o: (o.ref("barrier")[0], o.value("bytes")))
    if "try_wait" in w or "test_wait" in w:
        blocking = "try_wait" in w
        if "parity" in w:
            return make("wait_parity", "waitComplete, [barrier], phaseParity",
                        lambda o: (o.optional_dest(), o.ref("barrier")[0],
                                   o.value("the parity"), blocking))
        return make("wait_token", "waitComplete, [barrier], state",
                    lambda o: (o.optional_dest(), o.ref("barrier")[0], _token(o), blocking))
    if "inval" in w:
        return make("inval", "[barrier]", lambda o: (o.ref("barrier")[0],))
    raise _unknown(instr)


def _token(o: Operands) -> int:
    node = o.items.pop(0) if o.items else None
    if not isinstance(node, Name) or node.name not in o.scope.registers:
        raise o.error("expected the state register an arrive wrote", node)
    return o.scope.registers[node.name]


def _bulk(instr, p: list[str], words: list[str], make) -> Line:
    if words[:1] == ["commit_group"]:
        return make("commit_group", "", lambda o: ())
    if words[:1] == ["wait_group"]:
        read = "read" in words
        return make("wait_group", "N", lambda o: (o.value("N"), read))
    spaces = [x for x in p[3:] if x in ("shared::cluster", "shared::cta", "global")]
    if len(spaces) >= 2 and spaces[0].startswith("shared") and spaces[1] == "global":
        if "mbarrier::complete_tx::bytes" not in instr.opcode:
            raise PipelineError("a bulk load into shared memory completes on a barrier: "
                                "spell it `...mbarrier::complete_tx::bytes`",
                                instr.pos.line, instr.pos.column)
        if "multicast::cluster" in instr.opcode:
            return make("load", "[smem[i]], [tensor[k]], bytes, [barrier], ctaMask", _multicast)
        return make("load", "[smem[i]], [tensor[k]], bytes, [barrier]", _load)
    if len(spaces) >= 2 and spaces[0] == "global" and spaces[1].startswith("shared"):
        return make("store", "[tensor[k]], [smem[i]], bytes", _store)
    raise _unknown(instr)


def _load(o: Operands) -> tuple:
    dst, offset = o.ref("smem", allow_offset=True)
    src = o.ref("tensor")[0]
    size = o.value("the byte count")
    bar = o.ref("barrier")[0]
    return (dst, offset, src, size, bar, None)


def _multicast(o: Operands) -> tuple:
    """A multicast load names its stage and barrier in the issuing CTA; the copy lands at the
    same place in every CTA of `ctaMask`, and complete-tx goes to each one's own barrier."""
    dst, offset, src, size, bar, _ = _load(o)
    mask = o.value("the ctaMask")
    cta = o.scope.constants.get("cta", 0)
    return (dst, offset, src, size, bar, (mask, cta, dst.size, bar.size))


def _store(o: Operands) -> tuple:
    dst = o.ref("tensor")[0]
    src, offset = o.ref("smem", allow_offset=True)
    size = o.value("the byte count")
    return (dst, src, offset, size)


def _tcgen05(instr, words: list[str], make) -> Line:
    w = set(words)
    if "mma" in w:
        return make("mma", "[tmem], [smem[i]], tile[k]",
                    lambda o: (o.ref("tmem")[0], o.ref("smem")[0], o.tile()))
    if "commit" in w:
        return make("tc_commit", "[barrier]", lambda o: (o.ref("barrier")[0],))
    if "fence::after_thread_sync" in w:
        return make("tc_fence", "", lambda o: ())
    if "wait::ld" in w:
        return make("tc_wait_ld", "", lambda o: ())
    if "ld" in w or any(x.startswith("ld") for x in w):
        return make("tc_ld", "dest, [tmem]", lambda o: (o.dest(), o.ref("tmem")[0]))
    raise _unknown(instr)


def _unknown(instr) -> PipelineError:
    hint = None
    if instr.opcode.startswith("mbarrier.try_wait") and "parity" not in instr.opcode:
        hint = "`mbarrier.try_wait.parity` waits on a phase parity; plain try_wait takes a state"
    return PipelineError(f"`{instr.opcode}` is not an instruction the engine knows",
                         instr.pos.line, instr.pos.column,
                         hint=hint or "docs/language.md lists the instructions")
