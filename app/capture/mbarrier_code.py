"""The mbarrier lines of a generated agent: arrive (with drop and expect-tx), expect-tx,
complete-tx, `try_wait` on a parity or a token, and `mbarrier.inval`.

A mixin of `AgentWriter` (app.capture.agent_code): it emits through the writer's `emit`,
`_log` and operand helpers."""

from __future__ import annotations

from app.sim.program import (
    SINK,
    WAIT_BLOCKS,
    WAIT_MAY_FAIL,
)

from .kernel_layout import (
    ERROR_OPERAND_RANGE,
    CodegenError,
)


class MbarrierCode:
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
