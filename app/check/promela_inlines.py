"""The export's shared procedures: the inlines every move calls (a barrier's phase
completing, a copy's issue and its chunks landing, `tma_step`), the settling move and the hold
guard, each the Promela of its engine function."""

from __future__ import annotations

from app.check.promela_text import DEADLOCK, DONE, F_BAR, F_DIR, F_END, F_NEXT, F_STAGE, NF
from app.sim.barrier import TX_LIMIT
from app.sim.core import W_ASYNC, W_GENERIC


class Inlines:
    """Exporter's shared procedures (a mixin: it reads the exporter's sizes and tables)."""

    def _inlines(self) -> list[str]:
        nb = max(self.nb, 1)
        wk, na = self.wk, self.na
        ncar = 4 * nb
        return [
            # Clear knowledge bit `i` everywhere (ordering.forget of one bit).
            "inline forget_bit(i) {",
            f"  i5 = 0; do :: i5 < {na} -> KN[i5 * {wk} + BITW(i)] = KN[i5 * {wk} + BITW(i)]"
            " & ~BITM(i); i5++ :: else -> break od;",
            f"  i5 = 0; do :: i5 < {ncar} -> CAR[i5 * {wk} + BITW(i)] = "
            f"CAR[i5 * {wk} + BITW(i)] & ~BITM(i); i5++ :: else -> break od",
            "}",
            # barrier b: the phase completes (barrier_op's `done`).
            "inline complete_if_done(b) {",
            "  if :: B_pend[b] == 0 && B_tx[b] == 0 ->",
            "    B_phase[b] = B_phase[b] + 1; B_pend[b] = B_exp[b];",
            "    OBS[b] = 0; LED[b * 3] = 0; LED[b * 3 + 1] = 0; LED[b * 3 + 2] = 0;",
            *[f"    CAR[({2 * nb} + b) * {wk} + {w}] = CAR[b * {wk} + {w}]; "
              f"CAR[({3 * nb} + b) * {wk} + {w}] = CAR[({nb} + b) * {wk} + {w}]; "
              f"CAR[b * {wk} + {w}] = 0; CAR[({nb} + b) * {wk} + {w}] = 0;" for w in range(wk)],
            "    found = 1",
            "  :: else -> found = 0",
            "  fi",
            "}",
            # tx_check (sync.py)
            "inline tx_check(b) {",
            "  if :: !LED[b * 3 + 2] && B_pend[b] == 0 && LED[b * 3 + 1] > LED[b * 3] ->",
            "    LED[b * 3 + 2] = 1; DIAG(TX_MISMATCH)",
            "  :: else -> skip fi",
            "}",
            # ordering.touch and release
            "inline touch(a, b) {",
            f"  if :: B_phase[b] == 0 -> KN[a * {wk} + BITW({self.nch} + b)] = "
            f"KN[a * {wk} + BITW({self.nch} + b)] | BITM({self.nch} + b) :: else -> skip fi",
            "}",
            "inline order_release(a, b, relaxed, cluster) {",
            "  if :: relaxed -> skip",
            "  :: !relaxed && AGENT_CTA(a) == BAR_CTA(b) ->",
            *[f"    CAR[b * {wk} + {w}] = CAR[b * {wk} + {w}] | KN[a * {wk} + {w}];"
              for w in range(wk)],
            "    skip",
            "  :: !relaxed && AGENT_CTA(a) != BAR_CTA(b) && cluster ->",
            *[f"    CAR[({nb} + b) * {wk} + {w}] = CAR[({nb} + b) * {wk} + {w}] | "
              f"KN[a * {wk} + {w}];" for w in range(wk)],
            "    skip",
            "  :: else -> skip fi",
            "}",
            "inline order_acquire(a, b, relaxed, cluster) {",
            "  if :: !relaxed ->",
            *[f"    KN[a * {wk} + {w}] = KN[a * {wk} + {w}] | CAR[({2 * nb} + b) * {wk} + {w}]"
              f" | (cluster -> CAR[({3 * nb} + b) * {wk} + {w}] : 0);" for w in range(wk)],
            "    skip",
            "  :: else -> skip fi",
            "}",
            # take (sync.py): agent a holds tile of stage s.
            "inline take(a, s, tile) {",
            f"  if :: RELEASABLE(s) && tile >= 0 -> OWED[s * {self.nt} + DENSE(tile)] = "
            f"OWED[s * {self.nt} + DENSE(tile)] | (1 << a) :: else -> skip fi",
            "}",
            # discharge every (stage, tile) of stage s of agent bit `bits`.
            "inline discharge(s, bits) {",
            f"  i4 = 0; do :: i4 < {self.nt} -> OWED[s * {self.nt} + i4] = "
            f"OWED[s * {self.nt} + i4] & ~(bits); i4++ :: else -> break od",
            "}",
            self._release_inline(),
            # core.init_known: an access ordered after a program's own mbarrier.init
            "inline init_known(a, b) {",
            f"  if :: INIT_BY_LINE(b) && !(KN[a * {wk} + BITW({self.nch + nb} + b)] & "
            f"BITM({self.nch + nb} + b)) ->",
            f"    KN[a * {wk} + BITW({self.nch + nb} + b)] = KN[a * {wk} + BITW({self.nch + nb}"
            f" + b)] | BITM({self.nch + nb} + b); DIAG(ORDERING_RACE)",
            "  :: else -> skip fi",
            "}",
            # core.unread_by_store: a write over chunks [first, end) a store has not read
            "inline unread_by_store(s, first, end) {",
            "  i2 = 0; ok = 0;",
            "  do :: i2 < NOPS && !ok -> if :: OP[i2 * 11] == 1 && OP[i2 * 11 + 2] == s && "
            "!OP[i2 * 11 + 9] && OP[i2 * 11 + 4] < end && OP[i2 * 11 + 5] > first -> ok = 1; "
            "DIAG(OVERWRITE) :: else -> skip fi; i2++",
            "  :: else -> break od",
            "}",
            # remote_access(from, to)
            "inline remote_access(from, to) {",
            "  if :: from != to && EXITED(to) -> DIAG(REMOTE_AFTER_EXIT); ST = 3"
            " :: else -> skip fi",
            "}",
            # delete copy k, keeping the order of the others
            "inline del_op(k) {",
            "  i3 = k;",
            f"  do :: i3 < NOPS - 1 -> i2 = 0; do :: i2 < {NF} -> OP[i3 * {NF} + i2] = "
            f"OP[(i3 + 1) * {NF} + i2]; i2++ :: else -> break od; i3++",
            "  :: else -> break od;",
            f"  i2 = 0; do :: i2 < {NF} -> OP[(NOPS - 1) * {NF} + i2] = 0; i2++"
            " :: else -> break od;",
            "  NOPS--",
            "}",
            self._issue_inline(),
            *self._tma_inlines(),
        ]

    def _release_inline(self) -> str:
        """sync.release: an arrive on a release barrier discharges its stages."""
        body = []
        for b, stages in sorted(self.m.release_stages.items()):
            body.append(f"  :: b == {b} -> " + "; ".join(f"discharge({s}, 1 << a)"
                                                         for s in stages))
        if not body:
            return "inline release(a, b) { skip }"
        return "inline release(a, b) {\n  if\n" + "\n".join(body) + \
            "\n  :: else -> skip fi\n}"

    def _issue_inline(self) -> str:
        """copies._issue: the lowest serial the copy's name leaves free, then append."""
        same_name = ("(dir == 0 && STAGE_CTA(OP[i1 * 11 + 2]) == STAGE_CTA(stage)) || "
                     "(dir == 1 && OP[i1 * 11 + 6] == agent)")
        return "\n".join([
            "inline issue(dir, tile, stage, bar, first, end, agent, group) {",
            "  assert(NOPS < NOPSMAX);",
            "  t30 = 1;",
            "  do",
            "  :: found = 0; i1 = 0;",
            "     do :: i1 < NOPS -> if :: OP[i1 * 11 + 1] == tile && OP[i1 * 11] == dir && "
            f"({same_name}) && OP[i1 * 11 + 10] == t30 -> found = 1 :: else -> skip fi; i1++",
            "     :: else -> break od;",
            "     if :: found -> t30++ :: else -> break fi",
            "  od;",
            "  OP[NOPS * 11] = dir; OP[NOPS * 11 + 1] = tile; OP[NOPS * 11 + 2] = stage;",
            "  OP[NOPS * 11 + 3] = bar; OP[NOPS * 11 + 4] = first; OP[NOPS * 11 + 5] = end;",
            "  OP[NOPS * 11 + 6] = agent; OP[NOPS * 11 + 7] = group; OP[NOPS * 11 + 8] = 0;",
            "  OP[NOPS * 11 + 9] = 0; OP[NOPS * 11 + 10] = t30; NOPS++",
            "}"])

    def _tma_inlines(self) -> list[str]:
        wk = self.wk
        clustered = self.program.cluster > 1
        writes_observed = int(self.m.writes_observed)
        owed_old = f"OWED[t2 * {self.nt} + DENSE(t4)]"
        return [
            # copies.tma_step(k, hold)
            "inline tma_step(k, hold) {",
            "  if :: OP[k * 11] == 1 && OP[k * 11 + 9] -> del_op(k)",
            "  :: else ->",
            "    t2 = OP[k * 11 + 2]; t3 = OP[k * 11 + 4]; t1 = OP[k * 11 + 3];",
            "    t5 = CHUNK_BASE(t2) + t3;",
            "    if :: OP[k * 11] == 0 ->",
            "      t4 = CH_tile[t5];",
            *(["      remote_access(AGENT_CTA(OP[k * 11 + 6]), STAGE_CTA(t2));"]
              if clustered else []),
            "      if :: ST == 0 ->",
            f"        if :: t4 != OP[k * 11 + 1] && t4 >= 0 && {owed_old} != 0 && "
            "!(OP[k * 11 + 8] & 1) -> OP[k * 11 + 8] = OP[k * 11 + 8] | 1; DIAG(OVERWRITE)",
            "        :: else -> skip fi;",
            *(["        unread_by_store(t2, t3, t3 + 1);"] if self.stores_read else []),
            f"        CH_tile[t5] = OP[k * 11 + 1]; CH_w[t5] = {W_ASYNC};",
            f"        CAR[t1 * {wk} + BITW(t5)] = CAR[t1 * {wk} + BITW(t5)] | BITM(t5);",
            "        if :: hold -> HELD[t1] = HELD[t1] + CHUNK_BYTES(t2)",
            "        :: else ->",
            "          t6 = HELD[t1] + CHUNK_BYTES(t2); HELD[t1] = 0;",
            "          if :: !B_valid[t1] -> DIAG(UNDEFINED_BEHAVIOR); ST = 3",
            f"          :: B_valid[t1] && B_tx[t1] - t6 < -{TX_LIMIT} -> DIAG(TX_UNDERFLOW);"
            " ST = 3",
            "          :: else -> B_tx[t1] = B_tx[t1] - t6; complete_if_done(t1)",
            "          fi",
            "        fi",
            "      :: else -> skip fi",
            "    :: else ->",
            f"      if :: CH_w[t5] == {W_GENERIC} && !(OP[k * 11 + 8] & 2) -> "
            "OP[k * 11 + 8] = OP[k * 11 + 8] | 2; DIAG(PROXY_FENCE_MISSING) :: else -> skip fi",
            "    fi;",
            "    if :: ST == 0 ->",
            "      OP[k * 11 + 4] = t3 + 1;",
            "      if :: t3 + 1 == OP[k * 11 + 5] ->",
            f"        if :: OP[k * 11] == 0 || !{writes_observed} -> del_op(k)",
            "        :: else -> OP[k * 11 + 9] = 1 fi",
            "      :: else -> skip fi",
            "    :: else -> skip fi",
            "  fi",
            "}",
        ]

    # ------------------------------------------------------------------------- agents

    def _settle(self) -> list[str]:
        """Machine._settle after a move: no move left is done or a deadlock (with the
        deadlock's diagnostics: the long side of `tx_mismatch`, then `deadlock`)."""
        any_en = " || ".join(["NOPS > 0", *(f"EN_{a}" for a in range(self.na))])
        nb = max(self.nb, 1)
        return [
            f"#define ANY_ENABLED ({any_en})",
            "inline settle() {",
            "    if :: " + " && ".join(
                [f"{self.reg(a, 0)} >= {len(self.program.agents[a].nodes)}"
                 for a in range(self.na)] or ["1"]) + f" -> ST = {DONE}",
            f"    :: else -> ST = {DEADLOCK};",
            f"      i2 = 0; do :: i2 < {nb} ->",
            "        if :: B_valid[i2] && !LED[i2 * 3 + 2] && LED[i2 * 3] > LED[i2 * 3 + 1] && "
            "B_pend[i2] == 0 && B_tx[i2] > 0 -> DIAG(TX_MISMATCH) :: else -> skip fi; i2++",
            "      :: else -> break od;",
            "      DIAG(DEADLOCK)",
            "    fi",
            "}",
        ]

    def _can_hold(self, k: int) -> str:
        """copies.can_hold(k) as one expression (a guard must be exact: a move offered that
        does nothing would be a self-loop, a false livelock)."""
        f = k * NF
        bar = f"OP[{f + F_BAR}]"
        others = " || ".join(
            f"({j} < NOPS && OP[{j * NF + F_DIR}] == 0 && OP[{j * NF + F_BAR}] == {bar})"
            for j in range(self.max_ops) if j != k) or "0"
        return (f"({k} < NOPS && OP[{f + F_DIR}] == 0 && B_tx[{bar}] - HELD[{bar}] - "
                f"CHUNK_BYTES(OP[{f + F_STAGE}]) <= 0 && (OP[{f + F_NEXT}] + 1 < "
                f"OP[{f + F_END}] || {others}))")
