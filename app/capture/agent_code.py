"""One agent of a generated kernel: its registers and nodes as a CUDA device function (each
`Line` the PTX its text spells, under a `// [node] text` comment; control nodes as `if`/`goto`)."""

from __future__ import annotations

import re

from app.sim.core import TILE_SPAN
from app.sim.program import (
    Assign,
    Branch,
    Expr,
    Jump,
    Line,
    Program,
    Ref,
)

from .async_code import AsyncCode
from .cexpr import c_expr, cname
from .copy_code import CopyCode
from .kernel_layout import (
    ERROR_OUT_OF_BOUNDS,
    CodegenError,
    Layout,
)
from .mbarrier_code import MbarrierCode
from .sync_code import SyncCode

THREAD_REWRITES = (("c.lane == 0", "true"), ("__all_sync(FULL_MASK, ok)", "ok"),
                   ("__shfl_sync(FULL_MASK, token, 0)", "token"), ("write_tile(", "write_tile_1("),
                   ("check_tile(", "check_tile_1("))


def _one_thread(line: str) -> str:
    for old, new in THREAD_REWRITES:
        line = line.replace(old, new)
    return line


class AgentWriter(SyncCode, MbarrierCode, CopyCode, AsyncCode):
    """Writes one agent's function from its nodes; each instruction family's lines come from
    its mixin (sync_code, mbarrier_code, copy_code, async_code)."""

    def __init__(self, program: Program, lay: Layout, slot: int):
        self.program = program
        self.lay = lay
        self.slot = slot
        self.agent = program.agents[slot]
        names = [cname(n) for n in self.agent.registers]
        self.regs = {i + 1: n for i, n in enumerate(names)}
        self.tokens: set[int] = set()
        self.accumulators: dict[str, tuple[str, int]] = {}
        """Each `wgmma` accumulator: its C type and registers per thread."""
        self.out: list[str] = []
        self.thread = self.agent.lanes > 1
        """A lane of `lanes N`: one thread runs the agent, and issues what lane 0 issues for a
        whole warp (`_one_thread` rewrites the warp's collectives away)."""
        self.mask = f"{(1 << self.agent.lanes) - 1:#x}" if self.thread else "0xffffffff"
        """The membermask of the modelled lanes (the warp's other lanes exit at once)."""

    def reg(self, i: int) -> str:
        return self.regs[i]

    def expr(self, e: Expr) -> str:
        return c_expr(e, self.reg)

    def emit(self, text: str, indent: int = 1) -> None:
        self.out.append("    " * indent + text if text else "")

    # --------------------------------------------------------------------------- operands

    def base(self, ref: Ref) -> int:
        """The flat number of `ref`'s element 0 in the CTA it names: its own, or for `mapa`
        the one named (the engine's `Ref.base` is then CTA 0's)."""
        if ref.cta is None:
            return ref.base
        return ref.base + ref.cta.const * ref.size

    def index(self, ref: Ref, var: str) -> None:
        """`var` = the flat index (within its kind) of `ref`'s element, bounds-checked (and
        for `mapa` to a CTA a register names, the CTA too)."""
        if ref.cta is not None and ref.cta.const is None:
            self.emit(f"const i64 {var}_c = {self.expr(ref.cta)};  // mapa's CTA "
                      f"{ref.cta.text}", 2)
            self.emit(f"if ({var}_c < 0 || {var}_c >= {ref.ctas}) {{ err_code = "
                      f"{ERROR_OUT_OF_BOUNDS}; err_value = {var}_c; goto error; }}", 2)
            base = f"{ref.base} + (u32){var}_c * {ref.size}"
        else:
            base = self.base(ref)
        if ref.index.const is not None and isinstance(base, int):
            self.emit(f"const u32 {var} = {base + ref.index.const};  // {ref.array}"
                      f"[{ref.index.text}]", 2)
            return
        self.emit(f"const i64 {var}_i = {self.expr(ref.index)};  // {ref.array}"
                  f"[{ref.index.text}]", 2)
        self.emit(f"if ({var}_i < 0 || {var}_i >= {ref.size}) {{ err_code = "
                  f"{ERROR_OUT_OF_BOUNDS}; err_value = {var}_i; goto error; }}", 2)
        self.emit(f"const u32 {var} = {base} + (u32){var}_i;", 2)

    def barrier(self, ref: Ref, var: str = "b") -> str:
        if ref.cta is not None and self.node.kind not in ("arrive", "arrive_expect_tx"):
            raise CodegenError(f"`{self.node.op}` on another CTA's barrier: the generator "
                               "sends only arrives through the cluster window")
        self.index(ref, var)
        return f"bar_addr(c, {var})"

    def remote(self, ref: Ref) -> bool:
        """Whether the line addresses the barrier through the cluster window (`mapa`, or a
        `.shared::cluster` spelling): PTX then allows no state, only the sink `_`."""
        return ref.cta is not None or "shared::cluster" in self.node.op

    def stage(self, ref: Ref, var: str = "s") -> None:
        if (ref.cta is not None and ref.cta.const != self.agent.cta
                and self.node.kind in ("ld_shared", "st_shared")):
            raise CodegenError(f"`{self.node.op}` on [mapa({ref.array}, {ref.cta.text})]: the "
                               "generator reads and writes stages of the executing CTA only, "
                               "not through the cluster window")
        self.index(ref, var)

    def tile(self, ref: Ref, var: str = "t") -> None:
        """`var` = the tile's number in the CTA's tag space; `var`_id the engine's tile id."""
        self.index(ref, var + "_k")
        tensor = ref.base // TILE_SPAN
        self.emit(f"const u32 {var} = {self.lay.tensor_tiles[tensor]} + ({var}_k - "
                  f"{ref.base});  // tile number (tags)", 2)
        self.emit(f"const u32 {var}_id = {var}_k;  // the engine's tile id", 2)

    def value(self, e: Expr | None, default: int = 1) -> str:
        return str(default) if e is None else f"(u32)({self.expr(e)})"

    # ------------------------------------------------------------------------------ lines

    def spelled(self, node: Line) -> None:
        """Refuse a line whose `.sem`, `.scope` or flags the kernel would not spell as written
        (the kernel must never be safer than its program): the helpers issue arrives as
        `.release.cta` (`.release.cluster` through the cluster window), waits as `.acquire.cta`
        and a thread's expect-tx / complete-tx as `.relaxed.cta`; `.noComplete` is spelled."""
        kind = node.kind
        if kind in ("arrive", "arrive_drop", "arrive_expect_tx"):
            remote = node.args[1].cta is not None or "shared::cluster" in node.op
            want = ("release", "cluster" if remote else "cta")
        elif kind in ("wait_parity", "wait_token"):
            want = ("acquire", "cta")
        elif kind in ("expect_tx", "complete_tx"):
            want = ("relaxed", "cta")
        else:
            return
        have = (node.sem or want[0], node.scope or want[1])
        if have != want:
            raise CodegenError(f"`{node.op}`: the generator issues this as "
                               f".{want[0]}.{want[1]}, not .{have[0]}.{have[1]}: a kernel that "
                               "orders more than its program would hide an ordering_race")
        unknown = set(node.flags) - {"noComplete"}
        if unknown:
            raise CodegenError(f"`{node.op}`: the generator does not spell "
                               f"{', '.join(sorted(unknown))}")

    def line(self, n: int, node: Line) -> None:
        k = node.kind
        a = node.args
        self.node = node
        self.spelled(node)
        self.emit(f"// [{n}] {node.text}")
        self.emit("{")
        self.emit(f"const u32 NODE = {n};", 2)
        handler = getattr(self, "_" + k, None)
        if handler is None:
            raise CodegenError(f"`{node.op}`: the generator has no kernel code for this "
                               "instruction (the engine runs it; a capture cannot)")
        handler(a)
        self.emit("lines++;", 2)
        self.emit("}")

    def _log(self, kind: str, detail: str = "0", *words: str) -> None:
        words = list(words) + ["0"] * (5 - len(words))
        self.emit(f"if (c.lane == 0) log_put(L, pre, post, K_{kind.upper()}, {self.slot}, NODE, "
                  f"{detail}, {', '.join(words)});", 2)

    def _lane0(self, body: list[str]) -> None:
        self.emit("u64 pre = 0, post = 0;", 2)
        self.emit("if (c.lane == 0) {", 2)
        self.emit("pre = stamp();", 3)
        for line in body:
            self.emit(line, 3)
        self.emit("post = stamp();", 3)
        self.emit("}", 2)

    def _init(self, a) -> None:
        bar, count = a
        addr = self.barrier(bar)
        self.emit(f"const u32 count = {self.value(count)};", 2)
        self.emit("u64 pre = 0, post = 0;", 2)
        self.emit("if (c.lane == 0) {", 2)
        self.emit("pre = stamp();", 3)
        self.emit(f"mbar_init({addr}, count);", 3)
        if self.fences_itself():
            self.emit('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the '
                      "program spells its own fence.mbarrier_init", 3)
        else:
            self.emit("mbar_init_fence();", 3)
        self.emit("post = stamp();", 3)
        self.emit("}", 2)
        self.emit("__syncwarp();", 2)
        self._log("init", "0", "b", "count")

    def fences_itself(self) -> bool:
        """Whether the program orders its inits with its own cluster barrier lines: then the
        kernel adds no `fence.mbarrier_init` (it must never be safer than its program)."""
        return any(getattr(n, "kind", None) in ("mbarrier_init_fence", "cluster_arrive")
                   for agent in self.program.agents for n in agent.nodes)

    # ----------------------------------------------------------------------------- control

    def write(self) -> list[str]:
        agent = self.agent
        nodes = agent.nodes
        targets = {n.target for n in nodes if isinstance(n, (Jump, Branch))}
        body_start = len(self.out)
        for i, node in enumerate(nodes):
            if i in targets:
                self.out.append(f"n{i}:")
            if isinstance(node, Line):
                if node.kind == "assign":
                    self.emit(f"// [{i}] {node.text}")
                    self.emit("{")
                    self._assign(node.args)
                    self.emit("}")
                else:
                    self.line(i, node)
            elif isinstance(node, Jump):
                self.emit(f"goto {self._label(node.target, len(nodes))};")
            elif isinstance(node, Branch):
                self.emit(f"if (!{self._paren(self.expr(node.cond))}) goto "
                          f"{self._label(node.target, len(nodes))};  // {node.cond.text}")
            elif isinstance(node, Assign):
                for reg, e in node.updates:
                    self.emit(f"{self.reg(reg)} = {self.expr(e)};")
        body = self.out[body_start:]
        del self.out[body_start:]
        if len(nodes) in targets:
            body.append(f"n{len(nodes)}:")
        head = [f"// agent {agent.name} (warp {self.slot}): {len(agent.listing)} lines",
                f"__device__ __noinline__ void agent_{self.slot}(Ctx& c, Log& L, u32* summary) {{"]
        decls = []
        for i, name in self.regs.items():
            reg_name = agent.registers[i - 1]
            if reg_name.startswith("%"):
                continue
            unread = "" if _read(name, body) else "[[maybe_unused]] "
            decls.append(f"    {unread}i64 {name} = {agent.initial[i - 1]};  // {reg_name}")
        for name, (ctype, count) in self.accumulators.items():
            decls.append(f"    {ctype} wg_{cname(name)}[{count}] = {{}};  // wgmma accumulator "
                         f"{name}: its registers in this thread")
        if any(k == "wgmma_mma" and len(n.args[0]) == 1 for n in nodes if isinstance(n, Line)
               for k in (n.kind,)):
            decls.append("    u32 wg_a[4] = {};  // a wgmma A fragment from registers")
        for i in sorted(self.tokens):
            decls.append(f"    u64 tok_{self.reg(i)} = 0;  // state token of "
                         f"{agent.registers[i - 1]}")
        errors = any("goto error" in line for line in body)
        decls += ["    u32 lines = 0, bad_reads = 0, status = 0;"]
        if errors:
            decls += ["    u64 err_code = 0;", "    i64 err_value = 0;"]
        decls += [
                  "    // the start record: the CTA's rank, and its clocks at the cluster barriers",
                  "    if (c.lane == 0) log_put(L, clock_now(), globaltimer_now(), K_START, "
                  f"{self.slot}, 0, c.rank, c.sync[0], c.sync[1], c.sync[2], c.sync[3], 0);",
                  ""]
        timeouts = any("goto timed_out" in line for line in body)
        tail = ["    status = 0;  // finished",
                "    goto end;"]
        if timeouts:
            tail += ["timed_out:",
                     "    status = 1;  // a wait gave up: the kernel's view of a deadlock",
                     "    goto end;"]
        if errors:
            tail += ["error:",
                     "    status = 2;  // an operand out of range (the engine's "
                     "undefined_behavior)",
                     "    if (c.lane == 0) log_put(L, clock_now(), 0, K_ERROR, "
                     f"{self.slot}, 0, 0, err_code, (u64)err_value, 0, 0, 0);"]
        tail += ["end:",
                "    if (c.lane == 0) {",
                "        // the CTA's shared memory must outlive this agent's bulk stores",
                '        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");',
                f"        log_put(L, clock_now(), globaltimer_now(), K_END, {self.slot}, 0, "
                "status, lines, bad_reads, 0, 0, 0);",
                "        log_flush(L);",
                f"        volatile u32* sm = summary + (c.unit * {len(self.program.agents)} "
                f"+ {self.slot}) * SUMMARY_WORDS;",
                "        sm[0] = lines; sm[1] = bad_reads; sm[2] = status; sm[3] = 1;",
                "    }",
                "}"]
        out = head + decls + body + tail
        return [_one_thread(line) for line in out if line.strip() != "__syncwarp();"] \
            if self.thread else out

    @staticmethod
    def _label(target: int, end: int) -> str:
        return f"n{target}"

    @staticmethod
    def _paren(text: str) -> str:
        return text if text.startswith("(") and text.endswith(")") else f"({text})"


def _read(name: str, body: list[str]) -> bool:
    """Whether a line reads register `name` (not only assigns it): nvcc warns of a register
    that is set but never used (a `bar.red` result an agent ignores, say)."""
    use = re.compile(rf"\b{re.escape(name)}\b(?!\s*=[^=])")
    return any(use.search(line) for line in body)
