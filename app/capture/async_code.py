"""The asynchronous families' lines of a generated agent (sm_90a): `cp.async`, bulk
reductions, `st.async`/`red.async`, tensor copies and warpgroup MMAs.

A mixin of `AgentWriter` (app.capture.agent_code): it emits through the writer's `emit`,
`_log` and operand helpers."""

from __future__ import annotations

from .cexpr import cname
from .kernel_layout import (
    ERROR_OPERAND_RANGE,
    CodegenError,
)


class AsyncCode:
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
