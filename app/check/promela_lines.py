"""The export of each line kind: `_l_<kind>` writes one agent line's move as the engine's
handler of that kind does it (app/sim/families), guards and diagnostics included."""

from __future__ import annotations

from app.check.promela_text import RUNNING, Code, NotExported
from app.sim.barrier import COUNT_LIMIT, TX_LIMIT
from app.sim.core import NO_TILE, W_GENERIC, W_GENERIC_FENCED
from app.sim.program import SINK, TC_FENCED, Line


class Lines:
    """Exporter's line writers (a mixin: it uses the exporter's `expr`, `index` and `t`)."""

    def _line(self, code: Code, a: int, pc: int, node: Line) -> None:
        getattr(self, f"_l_{node.kind}")(code, a, node)

    def _valid(self, code: Code, b: str) -> None:
        code.ub(f"!B_valid[{b}]", "undefined_behavior")

    def _barrier_op_arrive(self, code: Code, b: str, n: str) -> None:
        code.ub(f"{n} > B_pend[{b}]", "over_arrival")
        code.add(f"B_pend[{b}] = B_pend[{b}] - {n}; complete_if_done({b});")

    def _remote(self, code: Code, a: int, where: str, x: str) -> None:
        """core.remote_access in a cluster: agent `a` reaching the barrier or stage `x` of a
        CTA (`where`: BAR_CTA or STAGE_CTA) that has exited is undefined; the rest of the move
        runs only while the status is still RUNNING."""
        if self.program.cluster > 1:
            code.add(f"remote_access({self.program.agents[a].cta}, {where}({x}));",
                     f"if :: ST == {RUNNING} ->")
            code.open += 1

    def _tx_bytes(self, code: Code, a: int, node) -> tuple[str, str]:
        """The barrier and byte count of an `expect_tx` or `complete_tx` line, checked as
        sync's handlers check them (0..TX_LIMIT bytes, a valid barrier, then remote access)."""
        bar, nbytes = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, nbytes)};")
        code.ub(f"!(0 <= {n} && {n} <= {TX_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        self._remote(code, a, "BAR_CTA", b)
        return b, n

    def _arrival(self, code: Code, a: int, b: str) -> None:
        """sync.arrival: the remote check, then `reuse_before_wait`."""
        self._remote(code, a, "BAR_CTA", b)
        code.add(f"if :: !OBS[{b}] && B_valid[{b}] && B_phase[{b}] > 0 -> OBS[{b}] = 1; "
                 "DIAG(REUSE_BEFORE_WAIT) :: else -> skip fi;")

    def _order_flags(self, node: Line) -> str:
        return f"{int(node.sem == 'relaxed')}, {int(node.scope == 'cluster')}"

    def _l_init(self, code, a, node):
        bar, count = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, count)};")
        code.ub(f"!(1 <= {n} && {n} <= {COUNT_LIMIT})", "undefined_behavior")
        code.ub(f"B_valid[{b}]", "undefined_behavior")
        code.add(f"B_phase[{b}] = 0; B_pend[{b}] = {n}; B_exp[{b}] = {n}; B_tx[{b}] = 0; "
                 f"B_valid[{b}] = 1;",
                 f"OBS[{b}] = 1; LED[{b} * 3] = 0; LED[{b} * 3 + 1] = 0; LED[{b} * 3 + 2] = 0;",
                 f"forget_bit({self.nch} + {b});",
                 *[f"CAR[({side * max(self.nb, 1)} + {b}) * {self.wk} + {w}] = 0;"
                   for side in range(4) for w in range(self.wk)],
                 f"forget_bit({self.nch + self.nb} + {b});",
                 f"KN[{a} * {self.wk} + BITW({self.nch + self.nb} + {b})] = KN[{a} * {self.wk} "
                 f"+ BITW({self.nch + self.nb} + {b})] | BITM({self.nch + self.nb} + {b});")

    def _l_inval(self, code, a, node):
        (bar,) = node.args
        b = self.index(code, a, bar)
        self._valid(code, b)
        code.add(f"B_valid[{b}] = 0;")

    def _l_arrive(self, code, a, node, drop: bool = False):
        dest, bar, count = node.args
        b = self.index(code, a, bar)
        n = self.t()
        if count is None:
            code.add(f"{n} = 1;")
        else:
            code.add(f"{n} = {self.expr(code, a, count)};")
            code.ub(f"!(1 <= {n} && {n} <= {COUNT_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        self._arrival(code, a, b)
        code.add(f"release({a}, {b});", f"touch({a}, {b});",
                 f"order_release({a}, {b}, {self._order_flags(node)});")
        if "noComplete" in node.flags:
            code.ub(f"{n} == B_pend[{b}] && B_tx[{b}] == 0", "undefined_behavior")
        if drop:
            code.ub(f"B_exp[{b}] - {n} < 1", "undefined_behavior")
            code.ub(f"{n} > B_pend[{b}]", "over_arrival")
            code.add(f"B_exp[{b}] = B_exp[{b}] - {n}; B_pend[{b}] = B_pend[{b}] - {n}; "
                     f"complete_if_done({b});")
        else:
            self._barrier_op_arrive(code, b, n)

    def _l_arrive_drop(self, code, a, node):
        self._l_arrive(code, a, node, drop=True)

    def _l_arrive_expect_tx(self, code, a, node):
        dest, bar, nbytes = node.args
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, nbytes)};")
        code.ub(f"!(0 <= {n} && {n} <= {TX_LIMIT})", "undefined_behavior")
        self._valid(code, b)
        code.add(f"init_known({a}, {b});")
        code.ub(f"B_pend[{b}] < 1", "over_arrival")
        self._arrival(code, a, b)
        code.add(f"release({a}, {b});", f"touch({a}, {b});",
                 f"order_release({a}, {b}, {self._order_flags(node)});",
                 f"LED[{b} * 3] = LED[{b} * 3] + {n};")
        code.ub(f"B_tx[{b}] + {n} > {TX_LIMIT}", "tx_overflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] + {n}; complete_if_done({b});",
                 f"B_pend[{b}] = B_pend[{b}] - 1; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_expect_tx(self, code, a, node):
        b, n = self._tx_bytes(code, a, node)
        code.add(f"touch({a}, {b});", f"LED[{b} * 3] = LED[{b} * 3] + {n};")
        code.ub(f"B_tx[{b}] + {n} > {TX_LIMIT}", "tx_overflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] + {n}; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_complete_tx(self, code, a, node):
        b, n = self._tx_bytes(code, a, node)
        code.add(f"LED[{b} * 3 + 1] = LED[{b} * 3 + 1] + {n};")
        code.ub(f"B_tx[{b}] - {n} < -{TX_LIMIT}", "tx_underflow")
        code.add(f"B_tx[{b}] = B_tx[{b}] - {n}; complete_if_done({b});",
                 f"if :: !found -> tx_check({b}) :: else -> skip fi;")

    def _l_wait_parity(self, code, a, node):
        dest, bar, parity_fn, blocking, _hint = node.args
        b = self.index(code, a, bar)
        par = self.t()
        code.add(f"{par} = {self.expr(code, a, parity_fn)};")
        code.ub(f"{par} != 0 && {par} != 1", "undefined_behavior")
        self._valid(code, b)
        nb = max(self.nb, 1)
        w = f"{a * nb} + {b}"
        okv = self.t()
        code.add(f"{okv} = ((B_phase[{b}] & 1) != {par});", f"init_known({a}, {b});")
        if dest != SINK:
            code.add(f"{self.reg(a, dest)} = {okv};")
        kbit = f"{self.nch} + {b}"
        code.add(
            f"if :: {okv} ->",
            f"  OBS[{b}] = 1; {self.reg(a, TC_FENCED)} = 0;",
            f"  if :: W_has[{w}] && B_phase[{b}] <= W_ph[{w}] -> ok = 1",
            f"  :: !(W_has[{w}] && B_phase[{b}] <= W_ph[{w}]) && B_phase[{b}] == 0 && "
            f"(KN[{a} * {self.wk} + BITW({kbit})] & BITM({kbit})) -> ok = 1",
            "  :: else -> ok = 0 fi;",
            f"  if :: !W_has[{w}] -> W_has[{w}] = 1; W_par[{w}] = {par}; W_ph[{w}] = "
            f"B_phase[{b}]",
            f"  :: else -> W_ph[{w}] = (B_phase[{b}] > W_ph[{w}] -> B_phase[{b}] : W_ph[{w}])"
            " fi;",
            f"  order_acquire({a}, {b}, {self._order_flags(node)});",
            "  if :: !ok ->",
            *[f"    if :: (SB[{s} * {self.wb} + BITW({b})] & BITM({b})) -> "
              f"take({a}, {s}, ST_tile[{s}]) :: else -> skip fi;" for s in range(self.ns)],
            "    skip",
            "  :: else -> DIAG(STALE_WAIT) fi",
            ":: else -> skip fi;")

    def _l_assign(self, code, a, node):
        (updates,) = node.args
        for r, e in updates:
            code.add(f"{self.reg(a, r)} = {self.expr(code, a, e)};")

    def _chunks(self, code: Code, a: int, stage: str, offset, nbytes: str) -> tuple[str, str]:
        start = self.t()
        code.add(f"{start} = {'0' if offset is None else self.expr(code, a, offset)};")
        code.ub(f"{nbytes} <= 0 || {start} < 0 || {start} + {nbytes} > STAGE_BYTES({stage})",
                "undefined_behavior")
        code.ub(f"{start} % CHUNK_BYTES({stage}) != 0 || {nbytes} % CHUNK_BYTES({stage}) != 0",
                "undefined_behavior")
        first, end = self.t(), self.t()
        code.add(f"{first} = {start} / CHUNK_BYTES({stage}); "
                 f"{end} = ({start} + {nbytes}) / CHUNK_BYTES({stage});")
        return first, end

    def _l_load(self, code, a, node):
        dst, offset, src, size, bar, multicast, src_offset = node.args
        if src_offset is not None:
            raise NotExported(f"`{node.op}`: a copy of part of a tile (`[tile[k] + off]`) is "
                              "not exported to Promela yet")
        stage = self.index(code, a, dst)
        tile = self.index(code, a, src)
        b = self.index(code, a, bar)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, size)};")
        code.ub(f"{n} > {TX_LIMIT}", "undefined_behavior")
        first, end = self._chunks(code, a, stage, offset, n)
        targets = []
        if multicast is None:
            targets.append((stage, b, None))
        else:
            mask_e, own, stage_size, bar_size = multicast
            mask = self.t()
            code.add(f"{mask} = {self.expr(code, a, mask_e)};")
            ctas = self.program.cluster
            code.ub(f"!(0 < {mask} && {mask} < {1 << ctas})", "undefined_behavior")
            for c in range(ctas):
                targets.append((f"({stage} + {(c - own) * stage_size})",
                                f"({b} + {(c - own) * bar_size})", f"(({mask} >> {c}) & 1)"))
        for _, bb, cond in targets:
            code.add(f"init_known({a}, {bb});" if cond is None else
                     f"if :: {cond} -> init_known({a}, {bb}) :: else -> skip fi;")
        for s, bb, cond in targets:
            body = [f"issue(0, {tile}, {s}, {bb}, {first}, {end}, {a}, 0);",
                    f"i3 = {first}; do :: i3 < {end} -> forget_bit(CHUNK_BASE({s}) + i3); i3++"
                    " :: else -> break od;",
                    f"if :: ST_tile[{s}] == {tile} -> skip :: else -> "
                    + " ".join(f"SB[{s} * {self.wb} + {w}] = 0;" for w in range(self.wb))
                    + " fi;",
                    f"ST_tile[{s}] = {tile};",
                    f"SB[{s} * {self.wb} + BITW({bb})] = SB[{s} * {self.wb} + BITW({bb})] | "
                    f"BITM({bb});",
                    f"LED[{bb} * 3 + 1] = LED[{bb} * 3 + 1] + {n};"]
            if cond is None:
                code.add(*body)
            else:
                code.add(f"if :: {cond} ->", *["  " + x for x in body], "  skip",
                         ":: else -> skip fi;")
        for _, bb, cond in targets:
            if cond is None:
                code.add(f"tx_check({bb});")
            else:
                code.add(f"if :: {cond} -> tx_check({bb}) :: else -> skip fi;")

    def _l_store(self, code, a, node):
        dst, src, offset, size, dst_offset = node.args
        if dst_offset is not None:
            raise NotExported(f"`{node.op}`: a store into part of a tile (`[tile[k] + off]`) "
                              "is not exported to Promela yet")
        tile = self.index(code, a, dst)
        stage = self.index(code, a, src)
        n = self.t()
        code.add(f"{n} = {self.expr(code, a, size)};")
        first, end = self._chunks(code, a, stage, offset, n)
        code.add(f"issue(1, {tile}, {stage}, -1, {first}, {end}, {a}, BULK[{a}]);")
        code.add("t31 = 0;",
                 f"i3 = {first}; do :: i3 < {end} -> "
                 f"if :: CH_tile[CHUNK_BASE({stage}) + i3] != {NO_TILE} && "
                 f"!(KN[{a} * {self.wk} + BITW(CHUNK_BASE({stage}) + i3)] & "
                 f"BITM(CHUNK_BASE({stage}) + i3)) -> t31++ :: else -> skip fi; i3++"
                 " :: else -> break od;",
                 "if :: t31 > 0 -> DIAG(ORDERING_RACE) :: else -> skip fi;")

    def _l_commit_group(self, code, a, node):
        code.add(f"BULK[{a}] = BULK[{a}] + 1;")

    def _l_wait_group(self, code, a, node):
        n, read = node.args
        code.add(f"t1 = {self.expr(code, a, n)};")

    def _l_proxy_fence(self, code, a, node):
        cta = self.program.agents[a].cta
        code.add(*[f"GR[{a} * {self.ws} + {w}] = 0;" for w in range(self.ws)])
        for s, stage in enumerate(self.program.stages):
            if stage.cta == cta:
                base = self.m.chunk_base[s]
                for c in range(stage.chunks):
                    code.add(f"if :: CH_w[{base + c}] == {W_GENERIC} -> CH_w[{base + c}] = "
                             f"{W_GENERIC_FENCED} :: else -> skip fi;")

    def _l_ld_shared(self, code, a, node):
        dest, stage_ref, tile_ref = node.args
        s = self.index(code, a, stage_ref)
        tile = self.index(code, a, tile_ref)
        self._remote(code, a, "STAGE_CTA", s)
        okc, other, empty, unordered = self.t(), self.t(), self.t(), self.t()
        wk = self.wk
        code.add(f"{okc} = 0; {other} = 0; {empty} = 0; {unordered} = 0;",
                 f"i3 = 0; do :: i3 < NCHUNKS({s}) ->",
                 f"  if :: CH_tile[CHUNK_BASE({s}) + i3] == {tile} -> {okc}++;",
                 f"     if :: !(KN[{a} * {wk} + BITW(CHUNK_BASE({s}) + i3)] & "
                 f"BITM(CHUNK_BASE({s}) + i3)) -> {unordered}++ :: else -> skip fi",
                 f"  :: CH_tile[CHUNK_BASE({s}) + i3] == {NO_TILE} && {tile} != {NO_TILE} ->"
                 f" {empty}++",
                 f"  :: else -> {other}++ fi; i3++",
                 ":: else -> break od;",
                 f"if :: {okc} == NCHUNKS({s}) -> if :: {unordered} > 0 -> DIAG(ORDERING_RACE)"
                 " :: else -> skip fi",
                 f":: {okc} < NCHUNKS({s}) && ({okc} > 0 || {other} == 0) -> DIAG(PARTIAL_READ)",
                 ":: else -> DIAG(STALE_READ) fi;",
                 f"if :: ST_tile[{s}] == {tile} -> take({a}, {s}, {tile}) :: else -> skip fi;",
                 f"GR[{a} * {self.ws} + BITW({s})] = GR[{a} * {self.ws} + BITW({s})] | "
                 f"BITM({s});")

    def _l_st_shared(self, code, a, node):
        stage_ref, tile_ref = node.args
        s = self.index(code, a, stage_ref)
        tile = self.index(code, a, tile_ref)
        nt = self.nt
        code.add(f"i3 = 0; do :: i3 < {nt} -> if :: OWED[{s} * {nt} + i3] != 0 && "
                 f"i3 != DENSE({tile}) -> DIAG(OVERWRITE); OWED[{s} * {nt} + i3] = 0 "
                 ":: else -> skip fi; i3++ :: else -> break od;")
        self._remote(code, a, "STAGE_CTA", s)
        if self.stores_read:
            code.add(f"unread_by_store({s}, 0, NCHUNKS({s}));")
        code.add(f"i3 = 0; do :: i3 < NCHUNKS({s}) -> CH_tile[CHUNK_BASE({s}) + i3] = {tile};"
                 f" CH_w[CHUNK_BASE({s}) + i3] = {W_GENERIC};",
                 f"  forget_bit(CHUNK_BASE({s}) + i3); KN[{a} * {self.wk} + "
                 f"BITW(CHUNK_BASE({s}) + i3)] = KN[{a} * {self.wk} + BITW(CHUNK_BASE({s}) + i3)]"
                 f" | BITM(CHUNK_BASE({s}) + i3); i3++ :: else -> break od;",
                 f"ST_tile[{s}] = {tile};",
                 *[f"SB[{s} * {self.wb} + {w}] = 0;" for w in range(self.wb)])

    def _l_ld_global(self, code, a, node):
        dest, tensor = node.args
        tile = self.index(code, a, tensor)
        code.add("ok = 0;",
                 f"i3 = 0; do :: i3 < NOPS -> if :: OP[i3 * 11] == 1 && OP[i3 * 11 + 1] == "
                 f"{tile} -> ok = 1 :: else -> skip fi; i3++ :: else -> break od;",
                 "if :: ok -> DIAG(STORE_NOT_VISIBLE) :: else -> skip fi;")

    # ------------------------------------------------------------------------ settling
