"""Reading one instruction's operands left to right, each checked against what its form takes,
with messages that name the form (`instructions.build` hands the result to its family's
reader)."""

from __future__ import annotations

from app.sim.program import SINK, Expr, Ref

from . import opcodes
from .errors import PipelineError
from .exprs import Scope, compile_expr
from .syntax import Address, BinOp, Func, Index, Name, TensorCoords


class Operands:
    """The operands of one instruction, read left to right with messages that name the form."""

    def __init__(self, instr, parsed: opcodes.Parsed, scope: Scope, arrays: dict):
        self.items = list(instr.operands)
        self.instr = instr
        self.parsed = parsed
        self.form = parsed.form.operands
        self.scope = scope
        self.arrays = arrays
        self.sink = False
        """Whether the last `optional_dest` read was the sink `_` (or no operand at all)."""
        self.dest_node = None

    def expect_count(self, low: int, high: int) -> None:
        n = len(self.items)
        if not low <= n <= high:
            want = str(low) if low == high else f"{low} to {high}"
            raise self.error(f"`{self.instr.opcode}` takes {want} operands; got {n}")

    def dest(self) -> int:
        """A destination register, or SINK for `_` and names that are not registers."""
        node = self.items.pop(0)
        if isinstance(node, Name):
            if node.name in self.scope.reg_arrays:
                raise self.error(f"`{node.name}` is a register array; name one element", node)
            return self.scope.registers.get(node.name, SINK)
        if (isinstance(node, Index) and isinstance(node.base, Name)
                and node.base.name in self.scope.reg_arrays):
            first, size = self.scope.reg_arrays[node.base.name]
            index = compile_expr(node.index, self.scope)
            if index.const is None or not 0 <= index.const < size:
                raise self.error(f"a destination is one register: `{node.base.name}[k]` with "
                                 f"k a constant in 0..{size - 1}", node)
            return first + index.const
        raise self.error("expected a destination register (or `_`)", node)

    def optional_dest(self) -> int:
        """PTX's first operand (`state`, `waitComplete`), which the language lets be left out:
        anything not in brackets."""
        self.sink = True
        if self.items and not isinstance(self.items[0], Address):
            self.dest_node = self.items[0]
            self.sink = isinstance(self.items[0], Name) and self.items[0].name == "_"
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
            if (index_expr.const is not None and not 0 <= index_expr.const < decl.size
                    and not self.scope.dead):
                raise self.error(f"`{name}[{index_expr.const}]` is out of range: `{name}` has "
                                 f"{decl.size} element(s)", node)
        if remote is not None:
            self._remote(node, kind, name, decl, remote)
        own = self.scope.constants.get("cta", 0) if decl.ctas > 1 else 0
        if remote is not None:
            return Ref(name, decl.base, decl.size, index_expr, remote, decl.ctas), offset
        return Ref(name, decl.base + own * decl.size, decl.size, index_expr), offset

    def _remote(self, node, kind: str, name: str, decl, cta) -> None:
        """A `[mapa(object, cta)]` operand: an object in another CTA's shared memory (PTX's
        `.shared::cluster` window), where the form allows one. A program without `cluster`
        is a cluster of one CTA, where `mapa(object, 0)` is the object itself; a constant CTA
        outside the cluster is refused where the line can run, and stops the run
        (`out_of_bounds`) where it is computed."""
        if kind not in ("barrier", "smem"):
            raise self.error(f"`mapa`: `{name}` is a {kind}, not in shared memory", node)
        if cta.const is not None and not 0 <= cta.const < decl.ctas and not self.scope.dead:
            shape = self.scope.constants.get("cluster_size", decl.ctas)
            raise self.error(f"`mapa({name}, {cta.const})`: the cluster has {shape} CTA(s), "
                             f"ranks 0..{shape - 1}", node,
                             hint="a line that never runs may name any CTA: guard it with a "
                                  "constant test, like `if (cluster_size > 1) { ... }`")
        form = self.parsed.form
        if form.remote:
            noun = {"smem": "stage"}.get(kind, kind)
            raise self.error(f"`{form.stem}` cannot take a {noun} in another CTA (`mapa`)",
                             node, hint=form.remote)
        space = self.parsed.get("space")
        if space in ("shared", "shared::cta"):
            raise self.error(f"`mapa(...)` names another CTA's shared memory, but `.{space}` "
                             "is the executing CTA's own", node,
                             hint="write `.shared::cluster` (PTX 9.7.13.15.8)")

    def remote_sink(self, ref: Ref, node) -> None:
        """PTX 9.7.13.15.8: an arrive on a barrier in another CTA "cannot return result"; PTX
        9.7.13.15.13: the sink `_` is then mandatory."""
        form = self.parsed.form
        remote = ref.cta is not None or self.parsed.get("space") == "shared::cluster"
        if form.remote_sink and remote and not self.sink:
            raise self.error(f"`{form.stem}` on a barrier in another CTA cannot return "
                             "a state: write `_` as its destination", self.dest_node,
                             hint="PTX 9.7.13.15.8: on `.shared::cluster`, arrive is "
                                  "\"supported, cannot return result\" (9.7.13.15.13: the sink "
                                  "`_` is mandatory)")

    def tensor_coords(self):
        """`[tensorMap, {c0, ...}]`: a tensor map (`tensor A shape {...} box {...} elem E;`)
        and as many coordinates as the opcode's `.Nd` and the map have dimensions."""
        from app.sim.families.tensor_copies import TensorBox

        node = self.items.pop(0) if self.items else None
        if not isinstance(node, TensorCoords):
            raise self.error("expected a tensor map and its coordinates, like `[A, {0, k * 64}]`",
                             node)
        name = node.tensor.name if isinstance(node.tensor, Name) else None
        decl = self.arrays.get(name)
        if name is None or decl is None or decl.kind != "tensor":
            if name is not None and decl is None:
                raise self.scope.unknown(name, node.tensor.pos)
            raise self.error("a tensor copy names a tensor map: `[A, {c0, ...}]` with `A` "
                             "declared `tensor A shape {...} box {...} elem E;`", node)
        if not decl.box:
            raise self.error(f"`{name}` is a tensor without a box: declare it as a tensor map "
                             f"(`tensor {name} shape {{...}} box {{...}} elem E;`)", node,
                             hint="PTX 9.7.9.27.1.2: the tensor map gives the box a tensor "
                                  "copy moves")
        dims = len(decl.box)
        written = int(self.parsed.get("dim")[0])
        coords = node.coords.items
        if written != dims or len(coords) != dims:
            raise self.error(f"`.{written}d` with {len(coords)} coordinate(s) on `{name}`, a "
                             f"{dims}-dimensional tensor map", node.coords,
                             hint=f"write `.{dims}d` and {dims} coordinate(s), innermost first")
        exprs = tuple(compile_expr(c, self.scope) for c in coords)
        return TensorBox(name, decl.base, decl.shape, decl.box, decl.box_bytes), exprs

    def multicast(self, dst: Ref, bar: Ref, nodes: tuple) -> tuple | None:
        """A multicast load's `ctaMask` and where its stage and barrier sit in every CTA."""
        if not self.parsed.get("multicast"):
            return None
        for ref, node, what in ((dst, nodes[0], "stage"), (bar, nodes[1], "barrier")):
            if ref.cta is not None:
                raise self.error(f"a multicast load names its {what} in the issuing CTA, "
                                 "without `mapa`", node, hint="the copy lands at the same "
                                                              "offset in every CTA of "
                                                              "`ctaMask` (PTX 9.7.9.25.4.1)")
        mask = self.value("the ctaMask")
        cta = self.scope.constants.get("cta", 0)
        return (mask, cta, dst.size, bar.size)

    def error(self, message: str, node=None, hint: str | None = None) -> PipelineError:
        pos = getattr(node, "pos", None) or self.instr.pos
        form = f"{self.instr.opcode} {self.form}" if self.form else self.instr.opcode
        return PipelineError(message, pos.line, pos.column,
                             hint=hint or f"the form is `{form};`")

    def done(self) -> None:
        if self.items:
            raise self.error("too many operands", self.items[0])

    @staticmethod
    def _example(kind: str) -> str:
        return {"barrier": "full_barrier[i]", "smem": "smem[i]", "tensor": "tile[k]",
                "tmem": "tmem_acc"}[kind]
