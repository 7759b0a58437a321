"""The fixed CUDA text of a generated kernel (app.capture.codegen fills in its %(...)s fields):
the device helpers and inline-PTX wrappers every kernel starts with, and the kernel itself."""

PRELUDE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long i64;

#define FULL_MASK 0xFFFFFFFFu
#define POISON 0xFFFFFFFFu
#define RECORD_WORDS 8
#define STAGE_RECORDS %(stage_records)d
#define SUMMARY_WORDS 4
#define LOGGING %(logging)d      // 0: the log is compiled out (a bandwidth build)
#define CLUSTER %(cluster)d      // CTAs of a cluster
#define AGENTS_PER_CTA %(agents_per_cta)d

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

// The clock of a logged line: none when the log is compiled out.
__device__ __forceinline__ u64 stamp() {
#if LOGGING
    return clock_now();
#else
    return 0;
#endif
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

// A barrier of another CTA of the cluster (`mapa`): the same shared::cta offset in CTA `rank`,
// as a shared::cluster address. A remote arrive returns no state (PTX: the sink `_`).
__device__ __forceinline__ u32 mapa_u32(u32 addr, u32 rank) {
    u32 out;
    asm volatile("mapa.shared::cluster.u32 %%0, %%1, %%2;" : "=r"(out) : "r"(addr), "r"(rank));
    return out;
}

__device__ __forceinline__ void mbar_arrive_cluster(u32 addr, u32) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%%0];"
                 :: "r"(addr) : "memory");
}

__device__ __forceinline__ void mbar_arrive_cluster_n(u32 addr, u32 count) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%%0], %%1;"
                 :: "r"(addr), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx_cluster_n(u32 addr, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%%0], %%1;"
                 :: "r"(addr), "r"(bytes) : "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %%0, %%%%cluster_ctarank;" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster: the barriers are initialized before any remote
// arrive, and no CTA exits while a peer may still write its shared memory.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
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

// One load into the same shared::cta offset of every CTA in `mask`, each completing tx on its
// own barrier at `bar`'s offset.
__device__ __forceinline__ void bulk_load_multicast(u32 dst, const void* src, u32 bytes, u32 bar,
                                                    unsigned short mask) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%%0], [%%1], %%2, [%%3], %%4;"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"(mask) : "memory");
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
    if (!LOGGING || l.region == 0) return;
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
    if (!LOGGING || l.region == 0) return;
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
    unsigned char* gmem;     // this unit's slice of global memory (a cluster shares one)
    u32 cta_base;            // tile number of this unit's first tile (tags)
    u64 deadline;
    u32 lane;
    u32 unit;                // the cluster's number (the CTA's, without a cluster)
    u32 rank;                // this CTA's rank in its cluster
    u64 sync[4];             // %%clock64 as each of four cluster barriers released (0: no cluster)
};
"""


KERNEL = r"""// ------------------------------------------------------------------ the kernel

// One unit (a CTA, or a cluster of CLUSTER CTAs launched with cuLaunchKernelEx) runs the whole
// pipeline on its own slice of global memory (`gmem`, filled by the host with tagged words); the
// first `log_ctas` units log every line into `log` (mapped host memory, `log_cap` records per
// agent); every unit writes a summary per agent.
extern "C" __global__ void __launch_bounds__(%(block)s, 1) pipeline_kernel(
        unsigned char* gmem, u64* log, u32* summary, u32 log_ctas, u32 log_cap, u64 deadline,
        u32 flush_every, u32 flush_before_arrive) {
    extern __shared__ __align__(128) unsigned char smem[];
    const u32 warp = threadIdx.x / 32;
    Ctx c;
    c.rank = CLUSTER > 1 ? cluster_rank() : 0;
    c.unit = blockIdx.x / CLUSTER;

    // Every stage starts as poison, so a read can tell a word that never landed.
    for (u32 i = threadIdx.x; i < (STAGING_OFFSET - %(stage_first)du) / 4; i += blockDim.x)
        ((u32*)(smem + %(stage_first)du))[i] = POISON;
    proxy_fence();
    if (threadIdx.x == 0) {
%(inits)s
        mbar_init_fence();
    }
    __syncthreads();
    for (u32 i = 0; i < 4; i++) {
        // the clocks of different SMs differ: the replay aligns them where these barriers
        // released every CTA of the cluster together
        if (CLUSTER > 1) cluster_sync();
        c.sync[i] = CLUSTER > 1 ? clock_now() : 0;
    }

    c.smem = smem;
    c.gmem = gmem + (u64)c.unit * GMEM_CTA_BYTES;
    c.cta_base = c.unit * TILES_PER_CTA;
    c.deadline = deadline;
    c.lane = %(lane)s;
    const u32 slot = c.rank * AGENTS_PER_CTA + %(local_slot)s;
    Log L;
    L.region = c.unit < log_ctas
        ? log + ((u64)(c.unit * N_AGENTS + slot) * log_cap) * RECORD_WORDS : (u64*)0;
    L.staging = (u64*)(smem + STAGING_OFFSET) + (u64)%(local_slot)s * STAGE_RECORDS * RECORD_WORDS;
    L.cap = log_cap;
    L.n = 0;
    L.staged = 0;
    L.flush_every = flush_every < 1 ? 1 : flush_every;
    L.flush_before_arrive = flush_before_arrive;
    switch (%(slot)s) {
%(dispatch)s
    default: break;
    }
%(exit)s
}
"""

EXIT_ONE_CTA = """\
    // No warp leaves before every agent is done, so no copy lands in freed shared memory.
    __syncthreads();
    if (CLUSTER > 1) cluster_sync();"""
"""How a kernel ends without a cluster (and, with `exit_sync`, with one): the text every
1-CTA kernel shipped in traces/raw ends with."""

EXIT_AS_PROGRAM = """\
    // The CTA exits when its own agents are done, as the program's CTA does: no cluster
    // barrier holds it for its peers, so a peer that still reaches into it (a remote arrive, a
    // multicast) does so on the GPU too (docs/gpu-capture.md, "How a cluster kernel ends").
    __syncthreads();"""
"""How a cluster kernel ends: as its program ends."""
