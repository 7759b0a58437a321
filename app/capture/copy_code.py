"""The copy and memory lines of a generated agent: bulk loads and stores with their groups,
the proxy fence, and shared and global words.

A mixin of `AgentWriter` (app.capture.agent_code): it emits through the writer's `emit`,
`_log` and operand helpers."""

from __future__ import annotations

from app.sim.core import TILE_SPAN
from app.sim.program import (
    Expr,
    Ref,
)

from .kernel_layout import (
    ERROR_OPERAND_RANGE,
    CodegenError,
)


class CopyCode:
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
