"""One agent of a generated kernel: its registers and nodes as a CUDA device function (each
`Line` the PTX its text spells, under a `// [node] text` comment; control nodes as `if`/`goto`)."""

from __future__ import annotations

import re

from app.sim.core import TILE_SPAN
from app.sim.program import (
    SINK,
    WAIT_BLOCKS,
    WAIT_MAY_FAIL,
    Assign,
    Branch,
    Expr,
    Jump,
    Line,
    Program,
    Ref,
)

from .cexpr import c_expr
from .kernel_layout import (
    ERROR_OPERAND_RANGE,
    ERROR_OUT_OF_BOUNDS,
    NAMED_BARRIER_EXIT,
    CodegenError,
    Layout,
)

THREAD_REWRITES = (("c.lane == 0", "true"), ("__all_sync(FULL_MASK, ok)", "ok"),
                   ("__shfl_sync(FULL_MASK, token, 0)", "token"), ("write_tile(", "write_tile_1("),
                   ("check_tile(", "check_tile_1("))


def _one_thread(line: str) -> str:
    for old, new in THREAD_REWRITES:
        line = line.replace(old, new)
    return line


def cname(name: str) -> str:
    return "r_" + re.sub(r"[^0-9A-Za-z_]", "_", name)


class AgentWriter:
    """Writes one agent's function from its nodes."""

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

    # ------------------------------------------------- named barriers, warp, cluster barrier

    def _named(self, a, word: str) -> None:
        """`bar{.cta}.sync` / `barrier{.cta}.arrive{.aligned}` as spelled, by every lane of the
        warp (an agent's arrival counts its 32 threads, as in the engine)."""
        bar_id, count = a
        if count is None:
            raise CodegenError(f"`{self.node.op}` without a thread count: the kernel holds a "
                               "warp that is done at its end, so a barrier of every thread would "
                               "wait for warps the program let exit")
        if bar_id.const is not None and not 0 <= bar_id.const < NAMED_BARRIER_EXIT:
            raise CodegenError(f"`{self.node.op}` on barrier {bar_id.const}: the kernel ends on "
                               f"barrier {NAMED_BARRIER_EXIT}; use 0..{NAMED_BARRIER_EXIT - 1}")
        self.emit(f"const i64 id = {self.expr(bar_id)};", 2)
        self.emit(f"const i64 n = {self.expr(count)};", 2)
        self.emit(f"if (id < 0 || id >= {NAMED_BARRIER_EXIT} || n <= 0 || n > 1024 || n % 32) "
                  f"{{ err_code = {ERROR_OPERAND_RANGE}; err_value = id; goto error; }}", 2)
        self.emit("const u64 pre = stamp();", 2)
        op = self.node.op
        if self.thread:  # lanes reach it one by one: the form without `.aligned`
            op = op.replace("bar.", "barrier.", 1).replace(".aligned", "")
        self.emit(f'asm volatile("{op} %0, %1;" :: "r"((u32)id), "r"((u32)n) : "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        self._log(word, "0", "(u64)id", "(u64)n")

    def _bar_sync(self, a) -> None:
        self._named(a, "bar_sync")

    def _bar_arrive(self, a) -> None:
        self._named(a, "bar_arrive")

    def line_mask(self, mask) -> str:
        """The line's membermask over the modelled lanes (the engine waits for no other lane's
        bit: lanes past the modelled ones exit at once)."""
        return f"{mask.const & int(self.mask, 16):#x}"

    def _elect(self, a) -> None:
        """`elect.sync d|p` by the whole warp; the agent is its elected thread, so every lane
        takes lane 0's answer (the engine's: d = 0, p = 1)."""
        dest, pred, mask = a
        self.emit("u32 d = 0, p = 0;", 2)
        self.emit("const u64 pre = stamp();", 2)
        mask = self.line_mask(mask)
        self.emit(f'asm volatile("{{\\n\\t.reg .pred P;\\n\\telect.sync %0|P, {mask};'
                  '\\n\\tselp.u32 %1, 1, 0, P;\\n\\t}" : "=r"(d), "=r"(p) :: "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        if self.thread:  # each lane its own answer, as the engine's lanes
            self.emit("const u32 leader = d, elected = p;", 2)
        else:
            self.emit("const u32 leader = __shfl_sync(FULL_MASK, d, 0);", 2)
            self.emit("const u32 elected = __shfl_sync(FULL_MASK, p, 0);", 2)
        self._log("elect", "0", "leader", "elected")
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = leader;", 2)
        if pred != SINK:
            self.emit(f"{self.reg(pred)} = elected;", 2)

    def _warp_sync(self, a) -> None:
        self.emit("const u64 pre = stamp();", 2)
        self.emit(f'asm volatile("bar.warp.sync {self.line_mask(a[0])};" ::: "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("warp_sync")

    def _cluster(self, word: str) -> None:
        self.emit("const u64 pre = stamp();", 2)
        op = self.node.op.replace(".aligned", "") if self.thread else self.node.op
        self.emit(f'asm volatile("{op};" ::: "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        self._log(word)

    def _cluster_arrive(self, a) -> None:
        self._cluster("cluster_arrive")

    def _cluster_wait(self, a) -> None:
        self._cluster("cluster_wait")

    def _mbarrier_init_fence(self, a) -> None:
        self._cluster("mbarrier_init_fence")

    def _setmaxnreg(self, a) -> None:
        """`setmaxnreg.{inc,dec}.sync.aligned.u32 N` by every thread of the agent's warpgroups
        (`.aligned`: all of a warpgroup's threads execute the same one, PTX 9.7.19.5); the kernel
        launches every warp with the program's `registers N` (`__maxnreg__`, kernel_layout's
        `check` says what it refuses), so the CTA's pool is the engine's."""
        target, increase = a
        word = "inc" if increase else "dec"
        self._wgmma(f'asm volatile("setmaxnreg.{word}.sync.aligned.u32 {target.const};" ::: '
                    '"memory");', "setmaxnreg", f"(u64){target.const}")
        # the log's detail says which: an `.inc` returned once the pool held what it asked for
        self.out[-1] = self.out[-1].replace(f"NODE, 0, (u64){target.const}",
                                            f"NODE, {int(increase)}, (u64){target.const}")

    def _arrive_like(self, a, kind: str, call: str) -> None:
        dest, bar, count = a
        addr = self.barrier(bar)
        self.emit(f"const u32 v = {self.value(count)};", 2)
        remote = self.remote(bar)
        if not remote:  # a remote arrive returns no token (nvcc's warning #177 otherwise)
            self.emit("u64 token = 0;", 2)
        self.emit("if (c.lane == 0 && L.flush_before_arrive && L.staged) log_flush(L);", 2)
        if remote:
            if dest != SINK or kind == "arrive_drop":
                raise CodegenError(f"`{self.node.op}` through the cluster window: PTX allows "
                                   "no state there (write `_`), and no arrive_drop")
            rank = "bar_cta(b)" if self.lay.cluster > 1 else "0"  # no cluster: a cluster of 1
            self.emit(f"const u32 where = mapa_u32({addr}, {rank});", 2)
            self._lane0([f"{call}_cluster{'' if count is None else '_n'}(where, v);"])
            self.emit("__syncwarp();", 2)
            self._log(kind, "1", "b", "v")  # detail 1: a remote arrive, no token
            return
        if "noComplete" in self.node.flags:  # PTX 9.7.13.15.13: undefined if it completes
            spelled = "mbarrier.arrive_drop" if kind == "arrive_drop" else "mbarrier.arrive"
            self._lane0([f'asm volatile("{spelled}.noComplete.shared::cta.b64 %0, [%1], %2;" '
                         f': "=l"(token) : "r"({addr}), "r"(v) : "memory");'])
        else:
            self._lane0([f"token = {call}({addr}, v);"])
        self.emit("__syncwarp();", 2)
        self._log(kind, "0", "b", "v", "token", "mbar_pending_count(token)")
        if dest != SINK:
            self.tokens.add(dest)
            self.emit(f"tok_{self.reg(dest)} = __shfl_sync(FULL_MASK, token, 0);  // the state "
                      "token (the engine keeps the phase number instead)", 2)

    def _arrive(self, a) -> None:
        self._arrive_like(a, "arrive", "mbar_arrive")

    def _arrive_drop(self, a) -> None:
        self._arrive_like(a, "arrive_drop", "mbar_arrive_drop")

    def _arrive_expect_tx(self, a) -> None:
        self._arrive_like(a, "arrive_expect_tx", "mbar_arrive_expect_tx")

    def _expect_tx(self, a) -> None:
        bar, nbytes = a
        addr = self.barrier(bar)
        self.emit(f"const u32 v = {self.value(nbytes)};", 2)
        self._lane0([f"mbar_expect_tx({addr}, v);"])
        self.emit("__syncwarp();", 2)
        self._log("expect_tx", "0", "b", "v")

    def _complete_tx(self, a) -> None:
        bar, nbytes = a
        addr = self.barrier(bar)
        self.emit(f"const u32 v = {self.value(nbytes)};", 2)
        self._lane0([f"mbar_complete_tx({addr}, v);"])
        self.emit("__syncwarp();", 2)
        self._log("complete_tx", "0", "b", "v")

    def _wait_parity(self, a) -> None:
        dest, bar, parity, blocking, hint = a
        addr = self.barrier(bar)
        self.emit(f"const i64 parity = {self.expr(parity)};", 2)
        self.emit(f"if (parity != 0 && parity != 1) {{ err_code = {ERROR_OPERAND_RANGE}; "
                  "err_value = parity; goto error; }", 2)
        self.emit("u32 tries = 1;", 2)
        self.emit("const u64 pre = stamp();", 2)
        if blocking == WAIT_MAY_FAIL:
            self.emit("// one try: the program branches on the answer (PTX's time limit)", 2)
            self.emit(f"u32 ok = {self._one_try(addr, '(u32)parity', hint, parity=True)};", 2)
        elif blocking:
            self.emit("// every lane waits (each gets the acquire); the warp agrees on the "
                      "answer", 2)
            self.emit(f"u32 ok = bounded_wait_parity({addr}, (u32)parity, c.deadline, &tries);",
                      2)
        else:
            self.emit(f"u32 ok = mbar_test_wait_parity({addr}, (u32)parity);", 2)
        self.emit("ok = __all_sync(FULL_MASK, ok);", 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("wait_parity", "0", "b", "(u64)parity", "ok", "tries",
                  str(int(blocking == WAIT_BLOCKS)))
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = ok;", 2)
        if blocking == WAIT_BLOCKS:
            self.emit("if (!ok) goto timed_out;", 2)

    def _wait_token(self, a) -> None:
        dest, bar, token, blocking, hint = a
        addr = self.barrier(bar)
        tok = f"tok_{self.reg(token)}"
        self.tokens.add(token)
        self.emit("u32 tries = 1;", 2)
        self.emit("const u64 pre = stamp();", 2)
        if blocking == WAIT_MAY_FAIL:
            self.emit(f"u32 ok = {self._one_try(addr, tok, hint, parity=False)};", 2)
        elif blocking:
            self.emit(f"u32 ok = bounded_wait_token({addr}, {tok}, c.deadline, &tries);", 2)
        else:
            self.emit(f"u32 ok = mbar_test_wait_token({addr}, {tok});", 2)
        self.emit("ok = __all_sync(FULL_MASK, ok);", 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("wait_token", "0", "b", tok, "ok", "tries", str(int(blocking == WAIT_BLOCKS)))
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = ok;", 2)
        if blocking == WAIT_BLOCKS:
            self.emit("if (!ok) goto timed_out;", 2)

    def _one_try(self, addr: str, operand: str, hint, parity: bool) -> str:
        """One `mbarrier.try_wait` with the program's `suspendTimeHint`, if it gave one."""
        kind = ".parity" if parity else ""
        reg = '"r"' if parity else '"l"'
        extra, ins = "", ""
        if hint is not None:
            extra, ins = ", %3", f', "r"((u32)({self.expr(hint)}))'
        return (f'[&] {{ u32 ok; asm volatile("{{\\n\\t.reg .pred p;\\n\\t'
                f'mbarrier.try_wait{kind}.shared::cta.b64 p, [%1], %2{extra};\\n\\t'
                f'selp.u32 %0, 1, 0, p;\\n\\t}}" : "=r"(ok) : "r"({addr}), {reg}({operand})'
                f'{ins} : "memory"); return ok; }}()')

    def _inval(self, a) -> None:
        (bar,) = a
        addr = self.barrier(bar)
        self._lane0([f"mbar_inval({addr});"])
        self.emit("__syncwarp();", 2)
        self._log("inval", "0", "b")

    def _copy_shape(self, stage_var: str, offset: Expr | None, nbytes: Expr) -> None:
        self.emit(f"const i64 off = {0 if offset is None else self.expr(offset)};", 2)
        self.emit(f"const i64 bytes = {self.expr(nbytes)};", 2)
        self.emit(f"if (bytes <= 0 || off < 0 || off + bytes > stage_bytes({stage_var}) || "
                  "off % 16 || bytes % 16) {", 2)
        self.emit(f"err_code = {ERROR_OPERAND_RANGE}; err_value = bytes; goto error;", 3)
        self.emit("}", 2)

    def _global_offset(self, tile: Ref, offset: Expr | None) -> str:
        """Where in its tile a copy starts: `[tile[k] + goff]`, checked as the engine checks
        it; else where it starts in the stage."""
        if offset is None:
            return "off"
        tile_bytes = self.program.tensors[tile.base // TILE_SPAN][2]
        self.emit(f"const i64 goff = {self.expr(offset)};", 2)
        self.emit(f"if (goff < 0 || goff % 16 || goff + bytes > {tile_bytes}) {{ err_code = "
                  f"{ERROR_OPERAND_RANGE}; err_value = goff; goto error; }}", 2)
        return "goff"

    def _load(self, a) -> None:
        dst, offset, src, nbytes, bar, multicast, src_offset = a
        self.stage(dst)
        self.tile(src)
        addr = self.barrier(bar)
        self._copy_shape("s", offset, nbytes)
        goff = self._global_offset(src, src_offset)
        where = f"smem_u32(stage_ptr(c, s)) + (u32)off, tile_ptr(c, t) + {goff}, (u32)bytes"
        if multicast is None:
            self._lane0([f"bulk_load({where}, {addr});"])
        else:
            self.emit(f"const i64 mask = {self.expr(multicast[0])};  // ctaMask", 2)
            self.emit(f"if (mask <= 0 || mask >= (1 << CLUSTER)) {{ err_code = "
                      f"{ERROR_OPERAND_RANGE}; err_value = mask; goto error; }}", 2)
            self._lane0([f"bulk_load_multicast({where}, {addr}, (unsigned short)mask);"])
        self.emit("__syncwarp();", 2)
        self._log("load", "0", "b", "s", "t_id", "(u64)bytes", "(u64)off")

    def _store(self, a) -> None:
        dst, src, offset, nbytes, dst_offset = a
        self.tile(dst)
        self.stage(src)
        self._copy_shape("s", offset, nbytes)
        goff = self._global_offset(dst, dst_offset)
        self._lane0([f"bulk_store(tile_ptr(c, t) + {goff}, smem_u32(stage_ptr(c, s)) + "
                     "(u32)off, (u32)bytes);"])
        self.emit("__syncwarp();", 2)
        self._log("store", "0", "t_id", "s", "(u64)bytes", "(u64)off")

    def _commit_group(self, a) -> None:
        self._lane0(["bulk_commit();"])
        self.emit("__syncwarp();", 2)
        self._log("commit_group")

    def _wait_group(self, a) -> None:
        n, read = a
        suffix = ".read" if read else ""
        if n.const is not None:
            if not 0 <= n.const <= 63:
                raise CodegenError(f"wait_group {n.const}: N is 0..63")
            body = [f'asm volatile("cp.async.bulk.wait_group{suffix} {n.const};" ::: "memory");']
            self.emit(f"const u32 groups = {n.const};", 2)
        else:
            self.emit(f"const u32 groups = (u32)({self.expr(n)});", 2)
            cases = " ".join(f'case {i}: asm volatile("cp.async.bulk.wait_group{suffix} {i};" '
                             '::: "memory"); break;' for i in range(8))
            body = [f"switch (groups) {{ {cases} default: asm volatile("
                    f'"cp.async.bulk.wait_group{suffix} 0;" ::: "memory"); }}']
        self._lane0(body)
        self.emit("__syncwarp();", 2)
        self._log("wait_group", "0", "groups", str(int(read)))

    def _proxy_fence(self, a) -> None:
        self.emit("const u64 pre = stamp();", 2)
        self.emit("proxy_fence();  // every lane that wrote shared memory", 2)
        self.emit("__syncwarp();", 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("proxy_fence")

    def _st_shared(self, a) -> None:
        stage, tile = a
        self.stage(stage)
        self.tile(tile)
        self.emit("const u64 pre = stamp();", 2)
        self.emit("write_tile((u32*)stage_ptr(c, s), stage_bytes(s) / 4, t, c.cta_base);", 2)
        self.emit("__syncwarp();", 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("st_shared", "0", "s", "t_id")

    def _ld_shared(self, a) -> None:
        dest, stage, tile = a
        self.stage(stage)
        self.tile(tile)
        tensor = tile.base // TILE_SPAN
        first = self.lay.tensor_tiles[tensor]
        check = next((f"check_box_{i}" for i, (t, _) in enumerate(self.lay.tensor_maps)
                      if t == tensor), "check_tile")
        self.emit("const u64 pre = stamp();", 2)
        self.emit(f"const Check k = {check}((const u32*)stage_ptr(c, s), stage_bytes(s) / 4, "
                  f"chunk_bytes(s) / 4, t, {first}, c.cta_base);", 2)
        self.emit("const u64 post = stamp();", 2)
        self.emit("if (k.bad) bad_reads++;", 2)
        self._log("ld_shared", "k.bad", "s", "t_id", "k.ok", "k.stale", "k.never")

    def _ld_global(self, a) -> None:
        dest, tile = a
        self.tile(tile)
        self.emit("const u64 pre = stamp();", 2)
        self.emit("const u32 first_word = ((volatile const u32*)tile_ptr(c, t))[0];", 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("ld_global", "0", "t_id", "first_word")

    # ------------------------------------------------- the asynchronous families (sm_90a)

    def _words(self) -> list[str]:
        """The opcode's qualifiers as written (the language takes them in any order)."""
        return self.node.op.split(".")

    def _cp_async(self, a) -> None:
        """`cp.async.{ca,cg}.shared.global`: lane 0 copies `cp-size` bytes of the tile (PTX
        9.7.9.25.3.1; the language's agent is the one thread that issues it)."""
        dst, offset, src, size = a
        self.stage(dst)
        self.tile(src)
        cop = "cg" if "cg" in self._words() else "ca"
        self.emit(f"const i64 off = {0 if offset is None else self.expr(offset)};", 2)
        self.emit(f"if (off < 0 || off + {size.const} > stage_bytes(s) || off % {size.const}) "
                  f"{{ err_code = {ERROR_OPERAND_RANGE}; err_value = off; goto error; }}", 2)
        self._lane0([f'asm volatile("cp.async.{cop}.shared.global [%0], [%1], {size.const};" '
                     ':: "r"(smem_u32(stage_ptr(c, s)) + (u32)off), "l"(tile_ptr(c, t) + off) '
                     ': "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("cp_async", "0", "s", "t_id", "(u64)off")

    def _cp_async_commit(self, a) -> None:
        self._lane0(['asm volatile("cp.async.commit_group;" ::: "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("cp_async_commit")

    def _cp_async_wait(self, a) -> None:
        """The wait makes lane 0's copies visible to lane 0; `__syncwarp` then orders them
        before the other lanes' reads (the whole warp checks shared memory)."""
        (n,) = a
        body = ("cp.async.wait_all;" if n is None else f"cp.async.wait_group {n.const};")
        self._lane0([f'asm volatile("{body}" ::: "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("cp_async_wait", "0", "0" if n is None else str(n.const))

    def _cp_async_arrive(self, a) -> None:
        bar, noinc = a
        addr = self.barrier(bar)
        suffix = ".noinc" if noinc else ""
        self._lane0([f'asm volatile("cp.async.mbarrier.arrive{suffix}.shared::cta.b64 [%0];" '
                     f':: "r"({addr}) : "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("cp_async_arrive", str(int(noinc)), "b")

    def _reduce_store(self, a) -> None:
        """`cp.reduce.async.bulk.global.shared::cta.bulk_group.redOp.type` (PTX 9.7.9.25.4.2),
        spelled in PTX's order whatever order the program wrote the qualifiers in."""
        dst, src, offset, nbytes = a
        words = self._words()
        op = next(w for w in words if w in ("and", "or", "xor", "add", "inc", "dec", "min",
                                            "max"))
        kind = next(w for w in reversed(words) if w in ("f16", "bf16", "b32", "u32", "s32",
                                                        "b64", "u64", "s64", "f32", "f64"))
        noftz = ".noftz" if "noftz" in words else ""
        self.tile(dst)
        self.stage(src)
        self._copy_shape("s", offset, nbytes)
        self._lane0([f'asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.{op}'
                     f'{noftz}.{kind} [%0], [%1], %2;" :: "l"(tile_ptr(c, t) + off), '
                     '"r"(smem_u32(stage_ptr(c, s)) + (u32)off), "r"((u32)bytes) : "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("reduce_store", "0", "t_id", "s", "(u64)bytes", "(u64)off")

    def _async_store(self, a, red: bool) -> None:
        """`st.async` / `red.async` into another CTA's stage, completing its bytes on the
        barrier there (PTX 9.7.9.12, 9.7.13.7). `st.async` stores the tile's own words at the
        offset (read from the tile in global memory), spelled with the bit type of the
        written type's size."""
        dst, offset, value, bar, nbytes = a
        if dst.cta is None or dst.cta.const is None or bar.cta is None:
            raise CodegenError(f"`{self.node.op}`: the generator needs the destination and the "
                               "barrier through `mapa` with a constant CTA")
        words = self._words()
        self.stage(dst)
        self.index(bar, "b")
        self.emit(f"const i64 off = {0 if offset is None else self.expr(offset)};", 2)
        self.emit(f"if (off < 0 || off + {nbytes} > stage_bytes(s)) {{ err_code = "
                  f"{ERROR_OPERAND_RANGE}; err_value = off; goto error; }}", 2)
        self.emit("const u32 where = mapa_u32(smem_u32(stage_ptr(c, s)) + (u32)off, "
                  f"{dst.cta.const});", 2)
        self.emit(f"const u32 bar = mapa_u32(bar_addr(c, b), {bar.cta.const});", 2)
        if red:
            op = next(w for w in words if w in ("inc", "dec", "min", "max", "and", "or", "xor",
                                                "add"))
            kind = next(w for w in reversed(words) if w in ("u32", "s32", "b32", "u64"))
            reg = "l" if kind == "u64" else "r"
            cast = "(u64)" if kind == "u64" else "(u32)"
            self.emit(f"const i64 v = {self.expr(value)};", 2)
            self._lane0([f'asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::'
                         f'complete_tx::bytes.{op}.{kind} [%0], %1, [%2];" :: "r"(where), '
                         f'"{reg}"({cast}v), "r"(bar) : "memory");'])
            self.emit("__syncwarp();", 2)
            self._log("red_async", "0", "s", "b", "(u64)off")
            return
        self.tile(value)
        size = 8 if any(w in ("b64", "u64", "s64", "f64") for w in words) else 4
        count = nbytes // size
        vec = {1: "", 2: ".v2", 4: ".v4"}[count]
        reg, ctype = ("l", "u64") if size == 8 else ("r", "u32")
        values = ", ".join(f"%{i + 1}" for i in range(count))
        operands = ", ".join(f'"{reg}"(src[{i}])' for i in range(count))
        self.emit(f"const {ctype}* src = (const {ctype}*)(tile_ptr(c, t) + off);", 2)
        self._lane0([f'asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes'
                     f'{vec}.b{size * 8} [%0], {{{values}}}, [%{count + 1}];" :: "r"(where), '
                     f'{operands}, "r"(bar) : "memory");'])
        self.emit("__syncwarp();", 2)
        self._log("st_async", "0", "s", "t_id", "b", "(u64)off")

    # ------------------------------------------------------------ tensor copies (9.7.9.27)

    def _map_number(self, name: str) -> int:
        return next(i for i, (_, box) in enumerate(self.lay.tensor_maps) if box.name == name)

    def _tensor_load(self, a) -> None:
        """`cp.async.bulk.tensor.Nd...tile.mbarrier::complete_tx::bytes [dst], [map, {c..}],
        [bar]`: the map (a CUtensorMap the host wrote into the unit's slice) is acquired for the
        tensormap proxy first (PTX 9.7.13.4: `fence.proxy.tensormap::generic`)."""
        dst, box, coords, bar, multicast = a
        self.stage(dst)
        addr = self.barrier(bar)
        m = self._map_number(box.name)
        self.emit("i64 k = 0;", 2)
        stride = 1
        for d, (c, n, b) in enumerate(zip(coords, box.shape, box.box, strict=True)):
            self.emit(f"const i64 c{d} = {self.expr(c)};", 2)
            self.emit(f"if (c{d} < 0 || c{d} >= {n} || c{d} % {b}) {{ err_code = "
                      f"{ERROR_OPERAND_RANGE}; err_value = c{d}; goto error; }}", 2)
            self.emit(f"k += (c{d} / {b}) * {stride};", 2)
            stride *= -(-n // b)
        self.emit(f"const u32 t_id = {box.base} + (u32)k;  // the engine's tile id", 2)
        self.emit(f"const unsigned char* map = c.gmem + {self.lay.map_offset}ull + {128 * m}ull;"
                  f"  // the CUtensorMap of {box.name}", 2)
        n = len(coords)
        where = ", ".join(f"%{2 + d}" for d in range(n))
        ins = ", ".join(f'"r"((int)c{d})' for d in range(n))
        dst_text = "smem_u32(stage_ptr(c, s))"
        head = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::"
                "bytes")
        body = ['asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: '
                '"l"(map) : "memory");']
        if multicast is None:
            body.append(f'asm volatile("{head} [%0], [%1, {{{where}}}], [%{2 + n}];" :: '
                        f'"r"({dst_text}), "l"(map), {ins}, "r"({addr}) : "memory");')
        else:
            self.emit(f"const i64 mask = {self.expr(multicast[0])};  // ctaMask", 2)
            self.emit(f"if (mask <= 0 || mask >= (1 << CLUSTER)) {{ err_code = "
                      f"{ERROR_OPERAND_RANGE}; err_value = mask; goto error; }}", 2)
            body.append(f'asm volatile("{head}.multicast::cluster [%0], [%1, {{{where}}}], '
                        f'[%{2 + n}], %{3 + n};" :: "r"({dst_text}), "l"(map), {ins}, '
                        f'"r"({addr}), "h"((unsigned short)mask) : "memory");')
        self._lane0(body)
        self.emit("__syncwarp();", 2)
        self._log("tensor_load", "0", "b", "s", "t_id", f"(u64){box.nbytes}")

    # --------------------------------------------------------- warpgroup MMAs (9.7.15)

    def _wgmma(self, body: str, kind: str, *words: str) -> None:
        """A warpgroup instruction: every thread of the agent's four warps executes it."""
        self.emit("const u64 pre = stamp();", 2)
        self.emit(body, 2)
        self.emit("const u64 post = stamp();", 2)
        self._log(kind, "0", *words)

    def _wgmma_fence(self, a) -> None:
        self._wgmma('asm volatile("wgmma.fence.sync.aligned;" ::: "memory");', "wgmma_fence")

    def _wgmma_commit(self, a) -> None:
        self._wgmma('asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");',
                    "wgmma_commit")

    def _wgmma_wait(self, a) -> None:
        (n,) = a
        self._wgmma(f'asm volatile("wgmma.wait_group.sync.aligned {n.const};" ::: "memory");',
                    "wgmma_wait", str(n.const))

    def _wgmma_mma(self, a) -> None:
        """`wgmma.mma_async` in PTX's operand order (9.7.15.5.2): the accumulator's registers,
        A's descriptor (or its four registers when the program names one stage, B's), B's
        descriptor, `scale-d` 1 (accumulate) and the immediates of its type (scale 1, no
        transpose). A descriptor holds the stage's shared address in PTX's matrix-descriptor
        encoding (no swizzle); the values the MMA computes are not checked."""
        operands, acc = a
        words = self._words()
        shape = next(w for w in words if w.startswith("m64n"))
        n = int(shape[len("m64n"):].split("k")[0])
        types = [w for w in words if w in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8",
                                            "b1", "f32", "s32")]
        dtype, atype, btype = types
        extra = "".join(f".{w}" for w in words if w in ("satfinite",))
        tail = ".and.popc" if atype == "b1" else ""
        count = n // 4 if dtype == "f16" else n // 2
        ctype, reg = ("float", "f") if dtype == "f32" else ("u32", "r")
        self.accumulators[acc] = (ctype, count)
        var = f"wg_{cname(acc)}"
        descs = []
        for i, (stage, _tile) in enumerate(operands):
            self.stage(stage, f"s{i}")
            descs.append(f"d{i}")
            self.emit(f"const u64 d{i} = wgmma_desc(smem_u32(stage_ptr(c, s{i})));", 2)
        regs = ", ".join(f"%{i}" for i in range(count))
        outs = ", ".join(f'"+{reg}"({var}[{i}])' for i in range(count))
        at = count
        if len(operands) == 2:
            a_text, b_text = f"%{at}", f"%{at + 1}"
            ins = '"l"(d0), "l"(d1)'
            at += 2
        else:
            a_text = "{" + ", ".join(f"%{at + i}" for i in range(4)) + "}"
            b_text = f"%{at + 4}"
            ins = ", ".join(f'"r"(wg_a[{i}])' for i in range(4)) + ', "l"(d0)'
            at += 5
        if atype in ("f16", "bf16"):
            imm = ", 1, 1, 0, 0" if len(operands) == 2 else ", 1, 1, 0"
        elif atype in ("tf32", "e4m3", "e5m2"):
            imm = ", 1, 1"
        else:
            imm = ""
        text = (f"wgmma.mma_async.sync.aligned.{shape}{extra}.{dtype}.{atype}.{btype}{tail} "
                f"{{{regs}}}, {a_text}, {b_text}, p{imm};")
        self.emit("const u64 pre = stamp();", 2)
        self.emit(f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{at}, 0;\\n{text}\\n}}"',
                  2)
        self.emit(f"    : {outs}", 2)
        self.emit(f'    : {ins}, "r"(1u) : "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("wgmma_mma", "0", "s0")

    def _st_async(self, a) -> None:
        self._async_store(a, red=False)

    def _red_async(self, a) -> None:
        self._async_store(a, red=True)

    def _assign(self, a) -> None:
        (updates,) = a
        for reg, e in updates:
            self.emit(f"{self.reg(reg)} = {self.expr(e)};", 2)

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
            decls.append(f"    i64 {name} = {agent.initial[i - 1]};  // {reg_name}")
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
