"""A pipeline program as a logging CUDA kernel (inline PTX, sm_90a).

`generate(program, title=...)` turns a compiled pipeline (`app.lang.compiler.instantiate`, the
same program the engine runs) into one readable CUDA source: one warp per agent (lane 0 issues
barrier operations and copies, the whole warp writes and checks shared memory), the barriers and
stages in shared memory, each global tensor filled with words that name their tile, every wait
bounded by a deadline, and every line the agent executes logged. The kernel is built from the
program's own nodes: each `Line` becomes the PTX its text spells, `Branch`/`Jump`/`Assign`
become `if`/`goto`/assignments over the agent's registers (`app.capture.cexpr` writes their
expressions in C).

What the log holds is written down in docs/gpu-capture.md ("Generated kernels");
`app.capture.gen_runner` launches the kernel and `app.replay.gpu_order` replays its log through the
engine in the order the GPU ran it. Hopper has no `tcgen05`: pipelines that use it are refused,
and so (for now) are clusters of more than one CTA.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.sim.program import SINK, Assign, Branch, Expr, Jump, Line, Program, Ref
from app.sim.smem import TILE_SPAN

from .cexpr import c_expr

RECORD_WORDS = 8
STAGE_RECORDS = 32
"""Records each agent keeps in shared memory before they are copied to the host."""
SUMMARY_WORDS = 4
POISON = 0xFFFFFFFF
SMEM_LIMIT = 227 * 1024

# Record kinds (word 2, bits 0..7). One per line kind, plus the agent's start and end.
KINDS = ("start", "end", "init", "arrive", "arrive_drop", "arrive_expect_tx", "expect_tx",
         "complete_tx", "wait_parity", "wait_token", "inval", "load", "store", "commit_group",
         "wait_group", "proxy_fence", "st_shared", "ld_shared", "ld_global", "error")
KIND_CODE = {name: i + 1 for i, name in enumerate(KINDS)}
KIND_NAME = {code: name for name, code in KIND_CODE.items()}

END_FINISHED, END_TIMED_OUT, END_ERROR = 0, 1, 2
ERROR_OUT_OF_BOUNDS, ERROR_OPERAND_RANGE = 1, 2

HOPPER_MISSING = {"mma": "tcgen05.mma", "tc_commit": "tcgen05.commit",
                  "tc_fence": "tcgen05.fence", "tc_ld": "tcgen05.ld",
                  "tc_wait_ld": "tcgen05.wait::ld", "st_global": "st.global of tcgen05.ld "
                                                                  "registers"}


class CodegenError(ValueError):
    """A program the generator cannot turn into a Hopper kernel; the message says why."""


@dataclass(frozen=True)
class Layout:
    """Where everything lives: shared memory offsets, global tensor offsets, tile tags."""

    barrier_offset: int
    stage_offsets: tuple[int, ...]
    staging_offset: int
    smem_bytes: int
    tensor_offsets: tuple[int, ...]
    """Byte offset of each tensor in one CTA's slice of global memory."""
    tensor_tiles: tuple[int, ...]
    """Tile number of each tensor's element 0 (tags count tiles over all tensors)."""
    gmem_cta_bytes: int
    tiles_per_cta: int
    threads: int

    def as_dict(self) -> dict:
        return {"smem_bytes": self.smem_bytes, "stage_offsets": list(self.stage_offsets),
                "gmem_cta_bytes": self.gmem_cta_bytes, "tiles_per_cta": self.tiles_per_cta,
                "tensor_offsets": list(self.tensor_offsets),
                "tensor_tiles": list(self.tensor_tiles), "threads": self.threads}


def _align(n: int, a: int = 128) -> int:
    return (n + a - 1) // a * a


def layout(program: Program) -> Layout:
    nb = len(program.barriers)
    offset = _align(8 * max(1, nb))
    stage_offsets = []
    for stage in program.stages:
        stage_offsets.append(offset)
        offset = _align(offset + stage.bytes)
    staging = offset
    smem = staging + len(program.agents) * STAGE_RECORDS * RECORD_WORDS * 8
    tensor_offsets, tensor_tiles, gbytes, tiles = [], [], 0, 0
    for _, elements, nbytes in program.tensors:
        tensor_offsets.append(gbytes)
        tensor_tiles.append(tiles)
        gbytes = _align(gbytes + elements * nbytes)
        tiles += elements
    return Layout(0, tuple(stage_offsets), staging, smem, tuple(tensor_offsets),
                  tuple(tensor_tiles), gbytes, tiles, 32 * len(program.agents))


def check(program: Program) -> None:
    """Raise CodegenError if the program cannot run on Hopper through this generator."""
    if program.cluster > 1:
        raise CodegenError(f"a cluster of {program.cluster} CTAs needs a cluster launch "
                           "(cuLaunchKernelEx), which the generator does not emit yet")
    for agent in program.agents:
        for node in agent.nodes:
            if isinstance(node, Line) and node.kind in HOPPER_MISSING:
                raise CodegenError(
                    f"{agent.name}: `{node.op}` needs {HOPPER_MISSING[node.kind]}, which "
                    "Hopper (sm_90a) does not have: tcgen05 is Blackwell's (sm_100a); this "
                    "pipeline stays simulation-only")
    lay = layout(program)
    if lay.smem_bytes > SMEM_LIMIT:
        raise CodegenError(f"the stages and the log need {lay.smem_bytes} bytes of shared "
                           f"memory; a Hopper block has at most {SMEM_LIMIT}")
    for stage in program.stages:
        if stage.chunk_bytes % 16 or stage.bytes % 16:
            raise CodegenError(f"{stage.name}: bulk copies move multiples of 16 bytes")
        if stage.bytes // stage.chunk_bytes > 64:
            raise CodegenError(f"{stage.name}: at most 64 chunks a stage")
    for _, _elements, nbytes in program.tensors:
        if nbytes % 16:
            raise CodegenError("tensor elements must be multiples of 16 bytes")
        if nbytes // 4 > 0x10000:
            raise CodegenError("a tensor element holds at most 65,536 words (the tag encoding)")


# --------------------------------------------------------------------------------- the source


PRELUDE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;

#define FULL_MASK 0xFFFFFFFFu
#define POISON 0xFFFFFFFFu
#define RECORD_WORDS 8
#define STAGE_RECORDS %(stage_records)d
#define SUMMARY_WORDS 4

// Record kinds (log word 2, bits 0..7): docs/gpu-capture.md, "Generated kernels".
%(kind_defines)s

// ------------------------------------------------------------------ clocks, addresses, integers

__device__ __forceinline__ u64 clock_now() {
    u64 c;
    asm volatile("mov.u64 %%0, %%%%clock64;" : "=l"(c) :: "memory");
    return c;
}

__device__ __forceinline__ u64 globaltimer_now() {
    u64 t;
    asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
    u64 a;
    asm("cvta.to.shared.u64 %%0, %%1;" : "=l"(a) : "l"(p));
    return (u32)a;
}

// The language's `/` and `%%` truncate toward zero, as C's do; a zero divisor gives 0 here (the
// engine stops the run with `division_by_zero` instead).
__device__ __forceinline__ i64 pl_div(i64 a, i64 b) { return b ? a / b : 0; }
__device__ __forceinline__ i64 pl_mod(i64 a, i64 b) { return b ? a %% b : 0; }

// ------------------------------------------------------------------ mbarrier (PTX ISA 9.7.13.15)

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%%0], %%1;" :: "r"(bar), "r"(count) : "memory");
}

// Make initialized barriers visible to the other threads and to the async proxy (the TMA).
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ u64 mbar_arrive(u32 bar, u32 count) {
    u64 state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %%0, [%%1], %%2;"
                 : "=l"(state) : "r"(bar), "r"(count) : "memory");
    return state;
}

__device__ __forceinline__ u64 mbar_arrive_drop(u32 bar, u32 count) {
    u64 state;
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %%0, [%%1], %%2;"
                 : "=l"(state) : "r"(bar), "r"(count) : "memory");
    return state;
}

__device__ __forceinline__ u64 mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    u64 state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %%0, [%%1], %%2;"
                 : "=l"(state) : "r"(bar), "r"(bytes) : "memory");
    return state;
}

__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%%0], %%1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_complete_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%%0], %%1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ u32 mbar_pending_count(u64 state) {
    u32 count;
    asm volatile("mbarrier.pending_count.b64 %%0, %%1;" : "=r"(count) : "l"(state));
    return count;
}

__device__ __forceinline__ u32 mbar_try_wait_parity(u32 bar, u32 parity) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%%1], %%2;\n\t"
                 "selp.u32 %%0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok;
}

__device__ __forceinline__ u32 mbar_test_wait_parity(u32 bar, u32 parity) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%%1], %%2;\n\t"
                 "selp.u32 %%0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok;
}

__device__ __forceinline__ u32 mbar_try_wait_token(u32 bar, u64 state) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.shared::cta.b64 p, [%%1], %%2;\n\t"
                 "selp.u32 %%0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "l"(state) : "memory");
    return ok;
}

__device__ __forceinline__ u32 mbar_test_wait_token(u32 bar, u64 state) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.test_wait.shared::cta.b64 p, [%%1], %%2;\n\t"
                 "selp.u32 %%0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "l"(state) : "memory");
    return ok;
}

__device__ __forceinline__ void mbar_inval(u32 bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%%0];" :: "r"(bar) : "memory");
}

// A blocking wait that never hangs: try_wait.parity until it succeeds or `deadline` cycles
// have passed. Returns 1 when the phase completed, 0 on a timeout; *tries counts the calls.
__device__ __forceinline__ u32 bounded_wait_parity(u32 bar, u32 parity, u64 deadline,
                                                   u32* tries) {
    u64 start = clock_now();
    u32 n = 0;
    while (true) {
        n++;
        if (mbar_try_wait_parity(bar, parity)) { *tries = n; return 1; }
        if (clock_now() - start > deadline) { *tries = n; return 0; }
    }
}

__device__ __forceinline__ u32 bounded_wait_token(u32 bar, u64 state, u64 deadline, u32* tries) {
    u64 start = clock_now();
    u32 n = 0;
    while (true) {
        n++;
        if (mbar_try_wait_token(bar, state)) { *tries = n; return 1; }
        if (clock_now() - start > deadline) { *tries = n; return 0; }
    }
}

// ------------------------------------------------------------------ bulk copies (PTX 9.7.9.25)

__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%%0], [%%1], %%2, [%%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void bulk_store(void* dst, u32 src, u32 bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%%0], [%%1], %%2;"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

__device__ __forceinline__ void proxy_fence() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ------------------------------------------------------------------ the event log

// Each agent stages its records in shared memory (a few cycles each) and copies them to mapped,
// pinned host memory when STAGE_RECORDS are staged, every `flush_every` records (1: at once), when
// the agent ends, and, with `flush_before_arrive`, before every arrive: an arrive is what traps
// (a second arrive in one phase), so then a trap loses only the record of the arrive itself.
// Word 0 (a clock with bit 0 set) goes last: a record whose word 0 is still 0 was never completed.
struct Log {
    u64* region;    // this agent's records in host memory; null when this CTA does not log
    u64* staging;   // records not copied out yet (shared memory)
    u32 cap, n, staged, flush_every;
    u32 flush_before_arrive;  // copy staged records out before every arrive (which may trap)
};

__device__ __forceinline__ void st_host(u64* p, u64 a, u64 b) {
    asm volatile("st.volatile.global.v2.u64 [%%0], {%%1, %%2};" :: "l"(p), "l"(a), "l"(b)
                 : "memory");
}

__device__ __noinline__ void log_flush(Log& l) {
    if (l.region == 0) return;
    for (u32 k = 0; k < l.staged; k++) {
        const u64* r = l.staging + (u64)k * RECORD_WORDS;
        if (l.n < l.cap) {
            u64* h = l.region + (u64)l.n * RECORD_WORDS;
            st_host(h + 2, r[2], r[3]);
            st_host(h + 4, r[4], r[5]);
            st_host(h + 6, r[6], r[7]);
            st_host(h + 0, r[0], r[1]);
        }
        l.n++;
    }
    l.staged = 0;
    __threadfence_system();
}

// One record: the clock before and after the operation, what it was (kind, agent, the node of
// the program it ran, a 32-bit detail) and four words of operands and results.
__device__ __forceinline__ void log_put(Log& l, u64 pre, u64 post, u32 kind, u32 agent,
                                        u32 node, u32 detail, u64 a, u64 b, u64 c, u64 d,
                                        u64 e) {
    if (l.region == 0) return;
    u64* r = l.staging + (u64)l.staged * RECORD_WORDS;
    r[0] = pre | 1ull;
    r[1] = post;
    r[2] = (u64)kind | ((u64)agent << 8) | ((u64)node << 16) | ((u64)detail << 32);
    r[3] = a; r[4] = b; r[5] = c; r[6] = d; r[7] = e;
    l.staged++;
    if (l.staged >= l.flush_every || l.staged == STAGE_RECORDS) log_flush(l);
}

// ------------------------------------------------------------------ tiles that name themselves

// Word w of a tile holds (tag << 16) | (w & 0xffff); tags number the tiles of all tensors of all
// CTAs (mod 65536). A warp checks what a stage holds against the tile it expects, per chunk:
// which chunks hold only the right words, which hold words of an earlier tile of the same tensor
// (stale), which still hold the poison every stage starts with (never written); anything else is
// another (later) tile's.
struct Check {
    u64 ok, stale, never;
    u32 bad;
};

__device__ __forceinline__ Check check_tile(const u32* p, u32 words, u32 chunk_words,
                                            u32 tile, u32 first, u32 cta_base) {
    u32 lane = threadIdx.x & 31;
    u32 chunks = words / chunk_words;
    u64 bad_chunks = 0, stale = 0, never = 0;
    u32 bad = 0;
    u32 want_tag = (cta_base + tile) & 0xFFFFu;
    for (u32 w = lane; w < words; w += 32) {
        u32 v = ((volatile const u32*)p)[w];
        if (v == ((want_tag << 16) | (w & 0xFFFFu))) continue;
        bad++;
        u64 bit = 1ull << (w / chunk_words);
        bad_chunks |= bit;
        if (v == POISON) { never |= bit; continue; }
        u32 t = ((v >> 16) - cta_base) & 0xFFFFu;   // the tile number this word belongs to
        if (t >= first && t < tile) stale |= bit;
    }
    for (int o = 16; o > 0; o >>= 1) {
        bad += __shfl_xor_sync(FULL_MASK, bad, o);
        bad_chunks |= __shfl_xor_sync(FULL_MASK, bad_chunks, o);
        stale |= __shfl_xor_sync(FULL_MASK, stale, o);
        never |= __shfl_xor_sync(FULL_MASK, never, o);
    }
    Check c;
    u64 all = chunks >= 64 ? ~0ull : ((1ull << chunks) - 1);
    c.ok = all & ~bad_chunks;
    c.stale = stale;
    c.never = never;
    c.bad = bad;
    return c;
}

__device__ __forceinline__ void write_tile(u32* p, u32 words, u32 tile, u32 cta_base) {
    u32 tag = (cta_base + tile) & 0xFFFFu;
    for (u32 w = threadIdx.x & 31; w < words; w += 32) p[w] = (tag << 16) | (w & 0xFFFFu);
}

// Every agent shares this view of the CTA.
struct Ctx {
    unsigned char* smem;
    unsigned char* gmem;     // this CTA's slice of global memory: every tensor
    u32 cta_base;            // tile number of this CTA's first tile (tags)
    u64 deadline;
    u32 lane;
};
"""


def _cname(name: str) -> str:
    return "r_" + re.sub(r"[^0-9A-Za-z_]", "_", name)


class _AgentWriter:
    """Writes one agent's function from its nodes."""

    def __init__(self, program: Program, lay: Layout, slot: int):
        self.program = program
        self.lay = lay
        self.slot = slot
        self.agent = program.agents[slot]
        names = [_cname(n) for n in self.agent.registers]
        self.regs = {i + 1: n for i, n in enumerate(names)}
        self.tokens: set[int] = set()
        self.out: list[str] = []

    def reg(self, i: int) -> str:
        return self.regs[i]

    def expr(self, e: Expr) -> str:
        return c_expr(e, self.reg)

    def emit(self, text: str, indent: int = 1) -> None:
        self.out.append("    " * indent + text if text else "")

    # --------------------------------------------------------------------------- operands

    def index(self, ref: Ref, var: str) -> None:
        """`var` = the flat index (within its kind) of `ref`'s element, bounds-checked."""
        if ref.index.const is not None:
            self.emit(f"const u32 {var} = {ref.base + ref.index.const};  // {ref.array}"
                      f"[{ref.index.text}]", 2)
            return
        self.emit(f"const i64 {var}_i = {self.expr(ref.index)};  // {ref.array}"
                  f"[{ref.index.text}]", 2)
        self.emit(f"if ({var}_i < 0 || {var}_i >= {ref.size}) {{ err_code = "
                  f"{ERROR_OUT_OF_BOUNDS}; err_value = {var}_i; goto error; }}", 2)
        self.emit(f"const u32 {var} = {ref.base} + (u32){var}_i;", 2)

    def barrier(self, ref: Ref, var: str = "b") -> str:
        self.index(ref, var)
        return f"bar_addr(c, {var})"

    def stage(self, ref: Ref, var: str = "s") -> None:
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

    def line(self, n: int, node: Line) -> None:
        k = node.kind
        a = node.args
        self.emit(f"// [{n}] {node.text}")
        self.emit("{")
        self.emit(f"const u32 NODE = {n};", 2)
        getattr(self, "_" + k)(a)
        self.emit("lines++;", 2)
        self.emit("}")

    def _log(self, kind: str, detail: str = "0", *words: str) -> None:
        words = list(words) + ["0"] * (5 - len(words))
        self.emit(f"if (c.lane == 0) log_put(L, pre, post, K_{kind.upper()}, {self.slot}, NODE, "
                  f"{detail}, {', '.join(words)});", 2)

    def _lane0(self, body: list[str]) -> None:
        self.emit("u64 pre = 0, post = 0;", 2)
        self.emit("if (c.lane == 0) {", 2)
        self.emit("pre = clock_now();", 3)
        for line in body:
            self.emit(line, 3)
        self.emit("post = clock_now();", 3)
        self.emit("}", 2)

    def _init(self, a) -> None:
        bar, count = a
        addr = self.barrier(bar)
        self.emit(f"const u32 count = {self.value(count)};", 2)
        self.emit("u64 pre = 0, post = 0;", 2)
        self.emit("if (c.lane == 0) {", 2)
        self.emit("pre = clock_now();", 3)
        self.emit(f"mbar_init({addr}, count);", 3)
        self.emit("mbar_init_fence();", 3)
        self.emit("post = clock_now();", 3)
        self.emit("}", 2)
        self.emit("__syncwarp();", 2)
        self._log("init", "0", "b", "count")

    def _arrive_like(self, a, kind: str, call: str) -> None:
        dest, bar, count = a
        addr = self.barrier(bar)
        self.emit(f"const u32 v = {self.value(count)};", 2)
        self.emit("u64 token = 0;", 2)
        self.emit("if (c.lane == 0 && L.flush_before_arrive && L.staged) log_flush(L);", 2)
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
        dest, bar, parity, blocking = a
        addr = self.barrier(bar)
        self.emit(f"const i64 parity = {self.expr(parity)};", 2)
        self.emit(f"if (parity != 0 && parity != 1) {{ err_code = {ERROR_OPERAND_RANGE}; "
                  "err_value = parity; goto error; }", 2)
        self.emit("u32 tries = 1;", 2)
        self.emit("const u64 pre = clock_now();", 2)
        if blocking:
            self.emit("// every lane waits (each gets the acquire); the warp agrees on the "
                      "answer", 2)
            self.emit(f"u32 ok = bounded_wait_parity({addr}, (u32)parity, c.deadline, &tries);",
                      2)
        else:
            self.emit(f"u32 ok = mbar_test_wait_parity({addr}, (u32)parity);", 2)
        self.emit("ok = __all_sync(FULL_MASK, ok);", 2)
        self.emit("const u64 post = clock_now();", 2)
        self._log("wait_parity", "0", "b", "(u64)parity", "ok", "tries", str(int(blocking)))
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = ok;", 2)
        if blocking:
            self.emit("if (!ok) goto timed_out;", 2)

    def _wait_token(self, a) -> None:
        dest, bar, token, blocking = a
        addr = self.barrier(bar)
        tok = f"tok_{self.reg(token)}"
        self.tokens.add(token)
        self.emit("u32 tries = 1;", 2)
        self.emit("const u64 pre = clock_now();", 2)
        if blocking:
            self.emit(f"u32 ok = bounded_wait_token({addr}, {tok}, c.deadline, &tries);", 2)
        else:
            self.emit(f"u32 ok = mbar_test_wait_token({addr}, {tok});", 2)
        self.emit("ok = __all_sync(FULL_MASK, ok);", 2)
        self.emit("const u64 post = clock_now();", 2)
        self._log("wait_token", "0", "b", tok, "ok", "tries", str(int(blocking)))
        if dest != SINK:
            self.emit(f"{self.reg(dest)} = ok;", 2)
        if blocking:
            self.emit("if (!ok) goto timed_out;", 2)

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

    def _load(self, a) -> None:
        dst, offset, src, nbytes, bar, multicast = a
        self.stage(dst)
        self.tile(src)
        addr = self.barrier(bar)
        self._copy_shape("s", offset, nbytes)
        self._lane0([f"bulk_load(smem_u32(stage_ptr(c, s)) + (u32)off, tile_ptr(c, t) + off, "
                     f"(u32)bytes, {addr});"])
        self.emit("__syncwarp();", 2)
        self._log("load", "0", "b", "s", "t_id", "(u64)bytes", "(u64)off")

    def _store(self, a) -> None:
        dst, src, offset, nbytes = a
        self.tile(dst)
        self.stage(src)
        self._copy_shape("s", offset, nbytes)
        self._lane0(["bulk_store(tile_ptr(c, t) + off, smem_u32(stage_ptr(c, s)) + (u32)off, "
                     "(u32)bytes);"])
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
        self.emit("const u64 pre = clock_now();", 2)
        self.emit("proxy_fence();  // every lane that wrote shared memory", 2)
        self.emit("__syncwarp();", 2)
        self.emit("const u64 post = clock_now();", 2)
        self._log("proxy_fence")

    def _st_shared(self, a) -> None:
        stage, tile = a
        self.stage(stage)
        self.tile(tile)
        self.emit("const u64 pre = clock_now();", 2)
        self.emit("write_tile((u32*)stage_ptr(c, s), stage_bytes(s) / 4, t, c.cta_base);", 2)
        self.emit("__syncwarp();", 2)
        self.emit("const u64 post = clock_now();", 2)
        self._log("st_shared", "0", "s", "t_id")

    def _ld_shared(self, a) -> None:
        dest, stage, tile = a
        self.stage(stage)
        self.tile(tile)
        tensor = tile.base // TILE_SPAN
        first = self.lay.tensor_tiles[tensor]
        self.emit("const u64 pre = clock_now();", 2)
        self.emit("const Check k = check_tile((const u32*)stage_ptr(c, s), stage_bytes(s) / 4, "
                  f"chunk_bytes(s) / 4, t, {first}, c.cta_base);", 2)
        self.emit("const u64 post = clock_now();", 2)
        self.emit("if (k.bad) bad_reads++;", 2)
        self._log("ld_shared", "k.bad", "s", "t_id", "k.ok", "k.stale", "k.never")

    def _ld_global(self, a) -> None:
        dest, tile = a
        self.tile(tile)
        self.emit("const u64 pre = clock_now();", 2)
        self.emit("const u32 first_word = ((volatile const u32*)tile_ptr(c, t))[0];", 2)
        self.emit("const u64 post = clock_now();", 2)
        self._log("ld_global", "0", "t_id", "first_word")

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
        for i in sorted(self.tokens):
            decls.append(f"    u64 tok_{self.reg(i)} = 0;  // state token of "
                         f"{agent.registers[i - 1]}")
        decls += ["    u32 lines = 0, bad_reads = 0, status = 0;",
                  "    u64 err_code = 0;", "    i64 err_value = 0;",
                  "    if (c.lane == 0) log_put(L, clock_now(), globaltimer_now(), K_START, "
                  f"{self.slot}, 0, 0, 0, 0, 0, 0, 0);", ""]
        timeouts = any("goto timed_out" in line for line in body)
        tail = ["    status = 0;  // finished",
                "    goto end;"]
        if timeouts:
            tail += ["timed_out:",
                     "    status = 1;  // a wait gave up: the kernel's view of a deadlock",
                     "    goto end;"]
        tail += ["error:",
                "    status = 2;  // an operand out of range (the engine's undefined_behavior)",
                "    if (c.lane == 0) log_put(L, clock_now(), 0, K_ERROR, "
                f"{self.slot}, 0, 0, err_code, (u64)err_value, 0, 0, 0);",
                "end:",
                "    if (c.lane == 0) {",
                "        // the CTA's shared memory must outlive this agent's bulk stores",
                '        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");',
                f"        log_put(L, clock_now(), globaltimer_now(), K_END, {self.slot}, 0, "
                "status, lines, bad_reads, 0, 0, 0);",
                "        log_flush(L);",
                f"        volatile u32* sm = summary + (blockIdx.x * {len(self.program.agents)} "
                f"+ {self.slot}) * SUMMARY_WORDS;",
                "        sm[0] = lines; sm[1] = bad_reads; sm[2] = status; sm[3] = 1;",
                "    }",
                "}"]
        return head + decls + body + tail

    @staticmethod
    def _label(target: int, end: int) -> str:
        return f"n{target}"

    @staticmethod
    def _paren(text: str) -> str:
        return text if text.startswith("(") and text.endswith(")") else f"({text})"


def generate(program: Program, title: str = "pipeline", params: dict | None = None,
             bugs=()) -> str:
    """The CUDA source of `program`'s logging kernel, `pipeline_kernel` (see module docs)."""
    check(program)
    lay = layout(program)
    kind_defines = "\n".join(f"#define K_{name.upper()} {code}" for name, code in
                             KIND_CODE.items())
    out = [f"// {title}: a logging CUDA kernel generated by mbarrier-inspector",
           "// (app/capture/codegen.py) from the pipeline's compiled program, for sm_90a.",
           f"// parameters: {', '.join(f'{k}={v}' for k, v in sorted((params or {}).items()))}",
           f"// bug toggles: {', '.join(sorted(bugs)) or 'none'}",
           "// Each agent is one warp; lane 0 issues barrier operations and copies, the whole",
           "// warp writes and checks shared memory. Comments `// [n]` name the program node.",
           PRELUDE % {"stage_records": STAGE_RECORDS, "kind_defines": kind_defines}]
    out.append("// ------------------------------------------------------------------ layout")
    out.append("")
    for i, decl in enumerate(program.barriers):
        init = decl.init_count if decl.init_count is not None else "none (a thread inits it)"
        out.append(f"// barrier {i}: {decl.name}, init count {init}")
    for i, stage in enumerate(program.stages):
        out.append(f"// stage {i}: {stage.name}, {stage.bytes} bytes in {stage.chunks} chunks "
                   f"of {stage.chunk_bytes}, at shared offset {lay.stage_offsets[i]}")
    for t, (name, elements, nbytes) in enumerate(program.tensors):
        out.append(f"// tensor {name}: {elements} tiles of {nbytes} bytes at global offset "
                   f"{lay.tensor_offsets[t]} (tile numbers {lay.tensor_tiles[t]}.."
                   f"{lay.tensor_tiles[t] + elements - 1})")
    out.append("")
    out.append(f"#define N_AGENTS {len(program.agents)}")
    out.append(f"#define GMEM_CTA_BYTES {lay.gmem_cta_bytes}ull")
    out.append(f"#define TILES_PER_CTA {lay.tiles_per_cta}u")
    out.append(f"#define STAGING_OFFSET {lay.staging_offset}u")
    out.append("")
    out.append("__device__ __forceinline__ u32 bar_addr(const Ctx& c, u32 b) {")
    out.append("    return smem_u32(c.smem) + 8 * b;")
    out.append("}")
    out.append("")
    out.append("__device__ __forceinline__ u32 stage_offset(u32 s) {")
    out.append("    switch (s) {")
    for i, off in enumerate(lay.stage_offsets):
        out.append(f"    case {i}: return {off};")
    out.append("    default: return 0;")
    out.append("    }")
    out.append("}")
    out.append("")
    for what, field in (("stage_bytes", "bytes"), ("chunk_bytes", "chunk_bytes")):
        out.append(f"__device__ __forceinline__ u32 {what}(u32 s) {{")
        values = {getattr(s, field) for s in program.stages}
        if len(values) <= 1:
            out.append(f"    return {values.pop() if values else 16};")
        else:
            out.append("    switch (s) {")
            for i, stage in enumerate(program.stages):
                out.append(f"    case {i}: return {getattr(stage, field)};")
            out.append("    default: return 16;")
            out.append("    }")
        out.append("}")
        out.append("")
    out.append("__device__ __forceinline__ unsigned char* stage_ptr(const Ctx& c, u32 s) {")
    out.append("    return c.smem + stage_offset(s);")
    out.append("}")
    out.append("")
    out.append("// Tile number t (over all tensors) -> its bytes in this CTA's slice of global "
               "memory.")
    out.append("__device__ __forceinline__ unsigned char* tile_ptr(const Ctx& c, u32 t) {")
    for t, (name, elements, nbytes) in enumerate(program.tensors):
        lo = lay.tensor_tiles[t]
        out.append(f"    if (t < {lo + elements}u) return c.gmem + {lay.tensor_offsets[t]}ull + "
                   f"(u64)(t - {lo}u) * {nbytes}ull;  // {name}")
    out.append("    return c.gmem;")
    out.append("}")
    out.append("")
    agents = []
    for slot in range(len(program.agents)):
        agents.extend(_AgentWriter(program, lay, slot).write())
        agents.append("")
    out.extend(agents)
    out.append(KERNEL % {"n_agents": len(program.agents), "inits": _inits(program),
                         "stage_words": sum(s.bytes for s in program.stages) // 4,
                         "stage_first": lay.stage_offsets[0] if lay.stage_offsets else 0,
                         "stage_end": lay.staging_offset,
                         "dispatch": "\n".join(f"    case {i}: agent_{i}(c, L, summary); break;"
                                               for i in range(len(program.agents)))})
    return "\n".join(out) + "\n"


def _inits(program: Program) -> str:
    lines = []
    for i, decl in enumerate(program.barriers):
        if decl.init_count is not None:
            lines.append(f"        mbar_init(smem_u32(smem) + 8 * {i}, {decl.init_count});"
                         f"  // {decl.name}")
    if not lines:
        return "        // no barrier is initialized before the agents start"
    return "\n".join(lines)


KERNEL = r"""// ------------------------------------------------------------------ the kernel

// One CTA runs the whole pipeline on its own slice of global memory (`gmem`, filled by the host
// with tagged words); the first `log_ctas` CTAs log every line into `log` (mapped host memory,
// `log_cap` records per agent); every CTA writes a summary per agent.
extern "C" __global__ void __launch_bounds__(32 * %(n_agents)d, 1) pipeline_kernel(
        unsigned char* gmem, u64* log, u32* summary, u32 log_ctas, u32 log_cap, u64 deadline,
        u32 flush_every, u32 flush_before_arrive) {
    extern __shared__ __align__(128) unsigned char smem[];
    const u32 warp = threadIdx.x / 32;

    // Every stage starts as poison, so a read can tell a word that never landed.
    for (u32 i = threadIdx.x; i < (STAGING_OFFSET - %(stage_first)du) / 4; i += blockDim.x)
        ((u32*)(smem + %(stage_first)du))[i] = POISON;
    proxy_fence();
    if (threadIdx.x == 0) {
%(inits)s
        mbar_init_fence();
    }
    __syncthreads();

    Ctx c;
    c.smem = smem;
    c.gmem = gmem + (u64)blockIdx.x * GMEM_CTA_BYTES;
    c.cta_base = blockIdx.x * TILES_PER_CTA;
    c.deadline = deadline;
    c.lane = threadIdx.x & 31;
    Log L;
    L.region = blockIdx.x < log_ctas
        ? log + ((u64)(blockIdx.x * N_AGENTS + warp) * log_cap) * RECORD_WORDS : (u64*)0;
    L.staging = (u64*)(smem + STAGING_OFFSET) + (u64)warp * STAGE_RECORDS * RECORD_WORDS;
    L.cap = log_cap;
    L.n = 0;
    L.staged = 0;
    L.flush_every = flush_every < 1 ? 1 : flush_every;
    L.flush_before_arrive = flush_before_arrive;
    switch (warp) {
%(dispatch)s
    default: break;
    }
    // No warp leaves before every agent is done, so no copy lands in freed shared memory.
    __syncthreads();
}
"""
