"""The synchronization lines of a generated agent: named barriers (`bar.red` too), `elect.sync`,
`bar.warp.sync`, the cluster barrier, `fence.mbarrier_init` and `setmaxnreg`.

A mixin of `AgentWriter` (app.capture.agent_code): it emits through the writer's `emit`,
`_log` and operand helpers."""

from __future__ import annotations

from app.sim.program import SINK

from .kernel_layout import (
    ERROR_OPERAND_RANGE,
    NAMED_BARRIER_EXIT,
    CodegenError,
)


class SyncCode:
    # ------------------------------------------------- named barriers, warp, cluster barrier

    def _named_operands(self, a) -> None:
        """`id` and `n`, the barrier and its thread count, checked as the engine checks them."""
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

    def _named(self, a, word: str) -> None:
        """`bar{.cta}.sync` / `barrier{.cta}.arrive{.aligned}` as spelled, by every lane of the
        warp (an agent's arrival counts its 32 threads, as in the engine)."""
        self._named_operands(a)
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

    def _bar_red(self, a) -> None:
        """`bar{.cta}.red.popc.u32` / `.and.pred` / `.or.pred` as spelled, by every lane of the
        warp (the language refuses it in a `lanes` agent): each thread gives the predicate the
        program computes (a `!c` is computed in C, the predicate handed to PTX is plain), and
        the log keeps the value the barrier wrote (a `.pred` as 0 / 1)."""
        barrier, dest, pred, _op = a
        self._named_operands(barrier)
        op = self.node.op
        self.emit(f"const u32 q = ({self.expr(pred)}) ? 1u : 0u;", 2)
        self.emit("u32 v = 0;", 2)
        self.emit("const u64 pre = stamp();", 2)
        if op.endswith(".u32"):
            body = f"\\t{op} %0, %1, %2, P;"
        else:
            body = f"\\t{op} Q, %1, %2, P;\\n\\tselp.u32 %0, 1, 0, Q;"
        self.emit(f'asm volatile("{{\\n\\t.reg .pred P, Q;\\n\\tsetp.ne.u32 P, %3, 0;\\n{body}'
                  '\\n\\t}" : "=r"(v) : "r"((u32)id), "r"((u32)n), "r"(q) : "memory");', 2)
        self.emit("const u64 post = stamp();", 2)
        self._log("bar_red", "0", "(u64)id", "(u64)n", "(u64)v")
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = v;", 2)

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
