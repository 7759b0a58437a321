"""An agent's compiled code made ready to run: its nodes with their operands turned into
functions of the register list (bounds-checked indices included), built once per program and
shared by every machine that runs it."""

from __future__ import annotations

from .core import REGISTER_LIMIT, checked
from .families import merged
from .program import _NAMESPACE, Assign, Branch, Expr, Jump, Line, ProgramError, Ref, function

HANDLERS = merged("handlers")
BLOCKERS = merged("blockers")
"""Line kinds that can block, with the test that says whether the agent can move."""
FUSED = merged("fused")


class AgentCode:
    """One agent's nodes with their operands turned into functions of the register list."""

    __slots__ = ("program", "nodes", "end", "kinds", "ops", "prepared", "line_of", "blockers",
                 "handlers", "is_line", "flow", "chains", "updates")

    def __init__(self, program):
        self.program = program
        self.nodes = program.nodes
        self.end = len(program.nodes)
        self.kinds = tuple(n.kind if isinstance(n, Line) else None for n in program.nodes)
        self.ops = tuple(n.op if isinstance(n, Line) else None for n in program.nodes)
        """Each line's PTX spelling (the step record's `op`)."""
        self.prepared = tuple(_prepare(n) for n in program.nodes)
        self.line_of = {node: i for i, node in enumerate(program.listing)}
        self.blockers = tuple(_blocker(n, k) for n, k in zip(self.nodes, self.kinds,
                                                               strict=True))
        self.handlers = tuple(HANDLERS.get(k) for k in self.kinds)
        self.is_line = tuple(k is not None for k in self.kinds) + (True,)
        self.flow = tuple(_flow(n) for n in program.nodes)
        """Per node, what `Machine._follow` does there: stop (`LINE`), run its register
        updates (`ASSIGN`), or go to a target: a jump's, or a branch's when its condition
        fails (the nodes whose `prepared` is a condition)."""
        self.updates = tuple(_updates(n) if k == "assign" else None
                             for n, k in zip(self.nodes, self.kinds, strict=True))
        """Per `assign` line, its register updates as one function of the registers
        (families/registers.py)."""
        self.chains = tuple(_chain(self, pc) for pc in range(self.end))
        """Per control node, `Machine._follow` from there as one function of the registers
        (None: a line, or control that may loop or runs long: the generic walk)."""


LINE, ASSIGN = object(), object()
"""`AgentCode.flow`'s marks: a line, and a node of register updates (anything that is not a
line, a jump or a branch)."""


def _flow(node):
    if isinstance(node, Line):
        return LINE
    if isinstance(node, Jump | Branch):
        return node.target
    return ASSIGN


def _prepare(node):
    if isinstance(node, Line):
        return tuple(_prepare_arg(x) for x in node.args)
    if isinstance(node, Branch):
        return function(node.cond)
    if isinstance(node, Assign):
        return tuple((reg, function(expr)) for reg, expr in node.updates)
    return None


def _prepare_arg(arg):
    if isinstance(arg, Expr):
        return function(arg)
    if isinstance(arg, Ref):
        return _index(arg)
    if isinstance(arg, tuple):
        return tuple(_prepare_arg(x) for x in arg)
    return arg


def _out_of_bounds(name: str, i: int, size: int):
    raise ProgramError("out_of_bounds", f"{name}[{i}] is out of range: {name} has {size} "
                                        "element(s)")


def _index(ref):
    """A function from registers to the flat index of `ref`'s element, bounds-checked."""
    if ref.cta is None and ref.index.const is not None:
        value = ref.base + ref.index.const
        return lambda r: value
    return eval(f"lambda r: {_index_code(ref)}", _CODE_NAMESPACE)  # noqa: S307


def _index_code(ref) -> str:
    base, size, index = ref.base, ref.size, ref.index
    if ref.cta is None and index.const is not None:
        return str(base + index.const)
    code = f"{base} + v if 0 <= (v := {index.code}) < {size} else _oob({ref.array!r}, v, {size})"
    if ref.cta is not None:
        code = (f"({code}) + c * {size} if 0 <= (c := {ref.cta.code}) < {ref.ctas} "
                f"else _oob('the cluster', c, {ref.ctas})")
    return code


_CODE_NAMESPACE = {**_NAMESPACE, "_oob": _out_of_bounds}


def _operand_code(arg) -> str | None:
    """An operand's value as a parenthesized expression over `r` (None: it has none)."""
    if isinstance(arg, Expr):
        return f"({arg.code})"
    if isinstance(arg, Ref):
        return f"({_index_code(arg)})"
    return None


def _blocker(node, kind):
    """The line's blocking test: its family's `fused` expression made a function where it
    gives one, else the kind's generic test (None: the line never blocks)."""
    fuse = FUSED.get(kind)
    fused = fuse(node, _operand_code) if fuse is not None else None
    if fused is None:
        return BLOCKERS.get(kind)
    code, names = fused
    return eval(f"lambda m, a, r, args: {code}", {**_CODE_NAMESPACE, **names})  # noqa: S307


_CODE: dict[int, tuple] = {}


def agent_code(program) -> tuple[AgentCode, ...]:
    """Every agent's prepared code, built once per program object."""
    cached = _CODE.get(id(program))
    if cached is None or cached[0] is not program:
        if len(_CODE) > 512:
            _CODE.clear()
        cached = _CODE[id(program)] = (program, tuple(AgentCode(a) for a in program.agents))
    return cached[1]


CHAIN_NODES = 32
"""Most control nodes one chain function follows (every path through its branches)."""


def _chain(code: AgentCode, pc: int):
    """The control nodes from `pc` to the lines they lead to, as one function: each node's
    code in order, the register list's PC set where a node can fail (an update or condition
    that raises leaves it there, as the generic walk does) and at the end. None where `pc` is
    a line, or a path comes back to a node (a loop of control nodes only: the walk's
    `CONTROL_LIMIT` stops it) or is longer than `CHAIN_NODES`."""
    if code.flow[pc] is LINE:
        return None
    body = ["def follow(r):"]
    if not _emit(code, pc, body, 1, (), [0]):
        return None
    namespace = {**_CODE_NAMESPACE, "checked": checked}
    exec("\n".join(body), namespace)  # noqa: S102 - code generated from the program's nodes
    return namespace["follow"]


def _emit(code: AgentCode, pc: int, body: list, depth: int, path: tuple, count: list) -> bool:
    pad = "    " * depth
    if pc >= code.end or code.flow[pc] is LINE:
        body.append(f"{pad}r[0] = {pc}")
        return True
    count[0] += 1
    node = code.nodes[pc]
    if pc in path or count[0] > CHAIN_NODES or not isinstance(node, Assign | Jump | Branch):
        return False
    if path and not isinstance(node, Jump):
        body.append(f"{pad}r[0] = {pc}")
    path = (*path, pc)
    if isinstance(node, Jump):
        return _emit(code, node.target, body, depth, path, count)
    if isinstance(node, Branch):
        body.append(f"{pad}if {node.cond.code}:")
        if not _emit(code, pc + 1, body, depth + 1, path, count):
            return False
        body.append(f"{pad}else:")
        return _emit(code, node.target, body, depth + 1, path, count)
    body.extend(_update_lines(node.updates, pad))
    return _emit(code, pc + 1, body, depth, path, count)


def _update_lines(updates, pad: str) -> list[str]:
    """Register updates, in order (a later one reads what an earlier one wrote), each value
    checked to stay within the register range."""
    out = []
    for reg, expr in updates:
        out.append(f"{pad}_v = {expr.code}")
        out.append(f"{pad}r[{reg}] = _v if -{REGISTER_LIMIT} <= _v <= {REGISTER_LIMIT} "
                   "else checked(_v)")
    return out


def _updates(line):
    """An `assign` line's updates as one function (None: operands of another shape)."""
    (updates,) = line.args
    if not all(isinstance(e, Expr) and isinstance(reg, int) for reg, e in updates):
        return None
    namespace = {**_CODE_NAMESPACE, "checked": checked}
    body = "\n".join(["def update(r):", *_update_lines(updates, "    ")])
    exec(body, namespace)  # noqa: S102 - code generated from the program's nodes
    return namespace["update"]
