"""CUDA source (inline PTX, sm_90a) for the kernels that run our scenarios on a Hopper GPU.

Each kernel performs one scenario with real `mbarrier` objects, real bulk copies (`cp.async.bulk`,
completing bytes on an mbarrier through `complete_tx`) and real bulk stores
(`cp.async.bulk.commit_group` / `wait_group.read`), and logs every barrier event it can observe.
The live barrier word cannot be read back on Hopper; what is logged is what PTX hands a thread: the
token an arrive returns (with its `mbarrier.pending_count`) and the result of each bounded
`try_wait.parity` loop. Records are staged in shared memory (a few cycles each) and flushed at
quiet points into mapped, pinned host memory, so the log costs little time between operations and
what was flushed survives a hardware trap. Every wait loop has a deadline and logs a timeout
instead of hanging.

The log record layout (eight 64-bit words) is written down in docs/gpu-capture.md and decoded by
`app.capture.decode`; the op codes and bug bits below are mirrored there as Python constants.
"""

from __future__ import annotations

RECORD_WORDS = 8
"""64-bit words per log record."""

MAX_AGENTS = 4
"""Log regions per CTA: agent slots 0..3 (producer/thread/writer, consumer0, consumer1)."""

POISON = 0xFFFFFFFF
"""What every SMEM word holds before any copy lands in it."""

# Op codes (record word 2, bits 0..7).
OP_INIT = 1
OP_ARRIVE = 2
OP_ARRIVE_EXPECT_TX = 3
OP_TMA_LOAD = 4
OP_WAIT = 5
OP_READ = 6
OP_TMA_STORE = 7
OP_WAIT_GROUP_READ = 8
OP_SMEM_WRITE = 9
OP_PROXY_FENCE = 10
OP_WAIT_GROUP = 11
OP_ANCHOR = 12

OP_NAMES = {
    OP_INIT: "init",
    OP_ARRIVE: "arrive",
    OP_ARRIVE_EXPECT_TX: "arrive_expect_tx",
    OP_TMA_LOAD: "tma_load",
    OP_WAIT: "wait",
    OP_READ: "read",
    OP_TMA_STORE: "tma_store",
    OP_WAIT_GROUP_READ: "wait_group_read",
    OP_SMEM_WRITE: "smem_write",
    OP_PROXY_FENCE: "proxy_fence",
    OP_WAIT_GROUP: "wait_group",
    OP_ANCHOR: "anchor",
}

NO_BARRIER = 0xFF

# Bug toggles as bits of the kernels' `flags` argument.
BUG_BITS = {
    "forget_phase_toggle": 1 << 0,
    "forget_producer_phase_toggle": 1 << 1,
    "consumer_skips_release": 1 << 2,
    "expect_tx_short": 1 << 3,
    "expect_tx_long": 1 << 4,
    "wrong_arrival_count": 1 << 5,
    "missing_proxy_fence": 1 << 6,
    "producer_skips_empty_wait": 1 << 7,
}
FLAG_FENCE_LOG = 1 << 16
"""Make every log record visible to the host (`fence.sc.sys`) before going on: slower agents, but
nothing logged is lost when the kernel traps right after."""

STAGE_RECORDS = 8
"""Records each agent stages in shared memory before `flush()` copies them to the host."""
STAGING_BYTES = MAX_AGENTS * STAGE_RECORDS * RECORD_WORDS * 8
"""Shared memory after the stage buffers that holds the staged records."""

SUMMARY_WORDS = 4
"""Per (CTA, agent) summary: tiles handled, tiles read wrong, timed out (0/1), finished (0/1)."""

SOURCE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;

#define RECORD_WORDS 8
#define MAX_AGENTS 4
#define SUMMARY_WORDS 4
#define POISON 0xFFFFFFFFu
#define NO_BARRIER 0xFFu

#define OP_INIT 1
#define OP_ARRIVE 2
#define OP_ARRIVE_EXPECT_TX 3
#define OP_TMA_LOAD 4
#define OP_WAIT 5
#define OP_READ 6
#define OP_TMA_STORE 7
#define OP_WAIT_GROUP_READ 8
#define OP_SMEM_WRITE 9
#define OP_PROXY_FENCE 10
#define OP_WAIT_GROUP 11
#define OP_ANCHOR 12

#define BUG_FORGET_PHASE 1u
#define BUG_FORGET_PRODUCER_PHASE 2u
#define BUG_SKIP_RELEASE 4u
#define BUG_EXPECT_SHORT 8u
#define BUG_EXPECT_LONG 16u
#define BUG_WRONG_COUNT 32u
#define BUG_MISSING_FENCE 64u
#define BUG_SKIP_EMPTY_WAIT 128u
#define FLAG_FENCE_LOG 65536u

#define FULL_MASK 0xFFFFFFFFu

// ------------------------------------------------------------------ clocks and addresses

__device__ __forceinline__ u64 clock_now() {
    u64 c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
    return c;
}

__device__ __forceinline__ u64 globaltimer_now() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
    u64 a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (u32)a;
}

// ------------------------------------------------------------------ mbarrier (PTX ISA 9.7.13.15)

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ u64 mbar_arrive(u32 bar) {
    u64 state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];"
                 : "=l"(state) : "r"(bar) : "memory");
    return state;
}

__device__ __forceinline__ u64 mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    u64 state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state) : "r"(bar), "r"(bytes) : "memory");
    return state;
}

__device__ __forceinline__ u32 mbar_pending_count(u64 state) {
    u32 count;
    asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(count) : "l"(state));
    return count;
}

__device__ __forceinline__ u32 mbar_try_wait_parity(u32 bar, u32 parity) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok;
}

// A bounded try_wait.parity loop: 1 when the phase completed, 0 when `deadline` cycles passed.
__device__ __forceinline__ u32 bounded_wait(u32 bar, u32 parity, u64 deadline, u32* tries) {
    u64 start = clock_now();
    u32 n = 0;
    while (true) {
        n++;
        if (mbar_try_wait_parity(bar, parity)) { *tries = n; return 1; }
        if (clock_now() - start > deadline) { *tries = n; return 0; }
    }
}

// ------------------------------------------------------------------ bulk copies (PTX 9.7.9.25)

__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

__device__ __forceinline__ void bulk_store(void* dst, u32 src, u32 bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// wait_group.read takes an immediate: one case per allowed number of pending groups.
__device__ __forceinline__ void bulk_wait_read(u32 pending) {
    switch (pending) {
    case 0: asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group.read 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory"); break;
    }
}

__device__ __forceinline__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ void proxy_fence() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ------------------------------------------------------------------ the event log

// One agent's cursor into its region of the mapped host log. Records are first staged in
// shared memory (a few cycles each) and copied out to the host by flush() at quiet points (after a
// tile has been read, after the loads have been issued), so no host write ever stands between an
// operation and the next one. Captures that may trap flush more often (FLAG_FENCE_LOG).
#define STAGE_RECORDS 8
#define STAGING_BYTES (MAX_AGENTS * STAGE_RECORDS * RECORD_WORDS * 8)

struct Log {
    u64* region;   // null when this CTA does not log
    u64* staging;  // this agent's records not flushed yet (shared memory)
    u32 cap;
    u32 n;         // records handed to the host so far
    u32 staged;
    u32 fence;
};

__device__ __forceinline__ Log log_open(u64* log, u32 log_ctas, u32 cap, u32 agent, u32 flags,
                                        unsigned char* staging_base) {
    Log l;
    l.region = (blockIdx.x < log_ctas)
        ? log + ((u64)(blockIdx.x * MAX_AGENTS + agent) * cap) * RECORD_WORDS : (u64*)0;
    l.staging = (u64*)staging_base + (u64)agent * STAGE_RECORDS * RECORD_WORDS;
    l.cap = cap;
    l.n = 0;
    l.staged = 0;
    l.fence = flags & FLAG_FENCE_LOG;
    return l;
}

__device__ __forceinline__ void st_sys_v2(u64* p, u64 a, u64 b) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" :: "l"(p), "l"(a), "l"(b) : "memory");
}

__device__ __forceinline__ void put_host(Log& l, u64 w0, u64 w1, u64 w2, u64 w3, u64 w4, u64 w5,
                                         u64 w6, u64 w7) {
    if (l.n < l.cap) {
        u64* h = l.region + (u64)l.n * RECORD_WORDS;
        st_sys_v2(h + 2, w2, w3);
        st_sys_v2(h + 4, w4, w5);
        st_sys_v2(h + 6, w6, w7);
        st_sys_v2(h + 0, w0, w1);
    }
    l.n++;
}

// Copy the staged records to the host, then one OP_ANCHOR record pairing %clock64 with
// %globaltimer (reading %globaltimer costs hundreds of cycles, so events carry only the clock).
// Word 0 (the clock, never 0) goes last: a record whose clock is 0 was never completed.
__device__ __noinline__ void flush(Log& l) {
    if (l.region == 0) return;
    for (u32 k = 0; k < l.staged; k++) {
        const u64* r = l.staging + (u64)k * RECORD_WORDS;
        if (l.n < l.cap) {
            u64* h = l.region + (u64)l.n * RECORD_WORDS;
            st_sys_v2(h + 2, r[2], r[3]);
            st_sys_v2(h + 4, r[4], r[5]);
            st_sys_v2(h + 6, r[6], r[7]);
            st_sys_v2(h + 0, r[0], r[1]);
        }
        l.n++;
    }
    l.staged = 0;
    u64 c = clock_now();
    u64 g = globaltimer_now();
    put_host(l, c | 1ull, g, (u64)OP_ANCHOR, 0, 0, 0, 0, 0);
    if (l.fence) __threadfence_system();
}

__device__ __forceinline__ void emit(Log& l, u64 clk, u32 op, u32 agent, u32 bar, u32 tile,
                                  u64 a, u64 b, u64 token, u64 result, u64 extra) {
    if (l.region == 0) return;
    if (l.staged == STAGE_RECORDS) flush(l);
    u64* r = l.staging + (u64)l.staged * RECORD_WORDS;
    r[0] = clk | 1ull;
    r[1] = 0;
    r[2] = (u64)op | ((u64)agent << 8) | ((u64)bar << 16) | ((u64)tile << 32);
    r[3] = a;
    r[4] = b;
    r[5] = token;
    r[6] = result;
    r[7] = extra;
    l.staged++;
    if (l.fence) flush(l);
}

__device__ __forceinline__ void summary_put(u32* summary, u32 agent, u32 handled, u32 bad,
                                            u32 timed_out, u32 finished) {
    volatile u32* s = summary + (blockIdx.x * MAX_AGENTS + agent) * SUMMARY_WORDS;
    s[0] = handled;
    s[1] = bad;
    s[2] = timed_out;
    s[3] = finished;
}

// ------------------------------------------------------------------ verifying a tile

// Word w of global tile g holds (g << 16) | w. A warp reads the tile from SMEM and names what is
// wrong: how many words, which chunks, which stale tile the first wrong word belongs to.
struct Check {
    u32 bad, stale, poison, first_bad, first_value, last_bad;
    u64 chunk_mask;
};

__device__ __forceinline__ Check verify_tile(const u32* tile_smem, u32 gtile, u32 words,
                                             u32 chunk_words) {
    u32 lane = threadIdx.x & 31;
    Check c;
    c.bad = 0; c.stale = 0; c.poison = 0; c.first_bad = 0xFFFFFFFFu; c.first_value = 0;
    c.last_bad = 0; c.chunk_mask = 0;
    for (u32 w = lane; w < words; w += 32) {
        u32 v = ((volatile const u32*)tile_smem)[w];
        u32 want = (gtile << 16) | w;
        if (v != want) {
            c.bad++;
            if (v == POISON) c.poison++;
            else if ((v & 0xFFFFu) == w) c.stale++;
            c.chunk_mask |= 1ull << (w / chunk_words);
            if (w < c.first_bad) { c.first_bad = w; c.first_value = v; }
            if (w + 1 > c.last_bad) c.last_bad = w + 1;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        c.bad += __shfl_xor_sync(FULL_MASK, c.bad, o);
        c.stale += __shfl_xor_sync(FULL_MASK, c.stale, o);
        c.poison += __shfl_xor_sync(FULL_MASK, c.poison, o);
        u32 lo = __shfl_xor_sync(FULL_MASK, (u32)c.chunk_mask, o);
        u32 hi = __shfl_xor_sync(FULL_MASK, (u32)(c.chunk_mask >> 32), o);
        c.chunk_mask |= ((u64)hi << 32) | lo;
        u32 fb = __shfl_xor_sync(FULL_MASK, c.first_bad, o);
        u32 fv = __shfl_xor_sync(FULL_MASK, c.first_value, o);
        if (fb < c.first_bad) { c.first_bad = fb; c.first_value = fv; }
        u32 lb = __shfl_xor_sync(FULL_MASK, c.last_bad, o);
        if (lb > c.last_bad) c.last_bad = lb;
    }
    return c;
}

__device__ __forceinline__ void poison_smem(unsigned char* base, u32 bytes) {
    u32* w = (u32*)base;
    for (u32 i = threadIdx.x; i < bytes / 4; i += blockDim.x) w[i] = POISON;
}

__device__ __forceinline__ void log_read(Log& l, u32 agent, u32 bar, u32 tile, u32 words,
                                         const Check& c, u64 clk) {
    emit(l, clk, OP_READ, agent, bar, tile,
         (u64)words | ((u64)c.bad << 32), (u64)c.stale | ((u64)c.poison << 32),
         c.chunk_mask, (u64)c.first_bad | ((u64)c.first_value << 32), c.last_bad);
}

// The bytes a producer announces with arrive.expect_tx: the tile, or one chunk off (bug toggles).
__device__ __forceinline__ u32 announced_bytes(u32 tile_bytes, u32 chunk_bytes, u32 flags) {
    if (flags & BUG_EXPECT_SHORT) return tile_bytes - chunk_bytes;
    if (flags & BUG_EXPECT_LONG) return tile_bytes + chunk_bytes;
    return tile_bytes;
}

// ------------------------------------------------------------------ scenario: single_barrier

// One warp drives one mbarrier by hand: init, then per tile arrive.expect_tx, the bulk load in
// chunks, try_wait.parity, read the tile. Lane 0 issues; the whole warp waits and reads.
extern "C" __global__ void single_barrier_kernel(
        const u32* src, u64* log, u32* summary, u32 tiles, u32 tile_bytes, u32 chunk_bytes,
        u32 flags, u32 log_ctas, u32 log_cap, u64 deadline) {
    extern __shared__ __align__(128) unsigned char smem[];
    u64* bar_obj = (u64*)smem;
    unsigned char* buf = smem + 128;
    u32 lane = threadIdx.x & 31;
    u32 bar = smem_u32(bar_obj);
    u32 words = tile_bytes / 4, chunk_words = chunk_bytes / 4, chunks = tile_bytes / chunk_bytes;
    Log l = log_open(log, log_ctas, log_cap, 0, flags, buf + tile_bytes);

    poison_smem(buf, tile_bytes);
    proxy_fence();
    __syncwarp();
    if (lane == 0) {
        u64 t = clock_now();
        mbar_init(bar, 1);
        mbar_init_fence();
        emit(l, t, OP_INIT, 0, 0, 0, 1, 0, 0, 0, 0);
    }
    __syncwarp();
    u32 phase = 0, bad_tiles = 0, timed_out = 0, handled = 0;
    for (u32 i = 0; i < tiles; i++) {
        u32 gtile = blockIdx.x * tiles + i;
        u32 bytes = announced_bytes(tile_bytes, chunk_bytes, flags);
        u64 t_arrive = 0, t_load = 0, token = 0;
        if (lane == 0) {
            t_arrive = clock_now();
            token = mbar_arrive_expect_tx(bar, bytes);
            t_load = clock_now();
            const unsigned char* g = (const unsigned char*)src + (u64)gtile * tile_bytes;
            for (u32 c = 0; c < chunks; c++)
                bulk_load(smem_u32(buf + c * chunk_bytes), g + c * chunk_bytes, chunk_bytes, bar);
        }
        __syncwarp();
        u64 t0 = clock_now();
        u32 tries;
        u32 ok = bounded_wait(bar, phase, deadline, &tries);
        ok = __all_sync(FULL_MASK, ok);
        u64 t1 = clock_now();
        Check c;
        if (ok) c = verify_tile((const u32*)buf, gtile, words, chunk_words);
        // Logged only now, so logging never stands between an operation and the next one.
        if (lane == 0) {
            emit(l, t_arrive, OP_ARRIVE_EXPECT_TX, 0, 0, i, bytes, 0, token,
                 mbar_pending_count(token), 0);
            emit(l, t_load, OP_TMA_LOAD, 0, 0, i, tile_bytes, chunks, 0, 0, 0);
            emit(l, t1, OP_WAIT, 0, 0, i, phase, t0, 0, ok, tries);
            if (ok) log_read(l, 0, 0, i, words, c, t1 + 1);
            flush(l);
        }
        if (!ok) { timed_out = 1; break; }
        if (c.bad) bad_tiles++;
        handled++;
        if (!(flags & BUG_FORGET_PHASE)) phase ^= 1;
        __syncwarp();
    }
    if (lane == 0) {
        flush(l);
        summary_put(summary, 0, handled, bad_tiles, timed_out, 1);
    }
}

// ------------------------------------------------------------------ scenario: double_buffer_tma

// A ring of `stages` SMEM buffers with a full_barrier and an empty_barrier each (CUTLASS
// PipelineTmaAsync). Warp 0 is the producer (lane 0 works); warps 1..consumers are consumers that
// wait full, verify the tile, store it back with a bulk store, wait_group.read, then arrive empty.
extern "C" __global__ void tma_ring_kernel(
        const u32* src, u32* dst, u64* log, u32* summary, u32 tiles, u32 tile_bytes,
        u32 chunk_bytes, u32 stages, u32 consumers, u32 flags, u32 log_ctas, u32 log_cap,
        u64 deadline) {
    extern __shared__ __align__(128) unsigned char smem[];
    u64* bars = (u64*)smem;                 // full_barrier[0..7], empty_barrier[0..7]
    unsigned char* bufs = smem + 128;
    u32 warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    u32 words = tile_bytes / 4, chunk_words = chunk_bytes / 4, chunks = tile_bytes / chunk_bytes;

    poison_smem(bufs, stages * tile_bytes);
    proxy_fence();
    if (threadIdx.x == 0) {
        u32 empty_count = (flags & BUG_WRONG_COUNT) ? 1 : consumers;
        for (u32 s = 0; s < stages; s++) {
            mbar_init(smem_u32(&bars[s]), 1);
            mbar_init(smem_u32(&bars[8 + s]), empty_count);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (warp == 0) {
        if (lane != 0) return;
        Log l = log_open(log, log_ctas, log_cap, 0, flags, bufs + stages * tile_bytes);
        u32 handled = 0, timed_out = 0;
        for (u32 i = 0; i < tiles; i++) {
            u32 s = i % stages;
            u32 gtile = blockIdx.x * tiles + i;
            u32 full = smem_u32(&bars[s]), empty = smem_u32(&bars[8 + s]);
            u64 t0 = 0, t1 = 0;
            u32 parity = 0, tries = 0, waited = !(flags & BUG_SKIP_EMPTY_WAIT);
            if (waited) {
                // producer_acquire: make_producer_start_state() starts at phase 1.
                parity = (flags & BUG_FORGET_PRODUCER_PHASE) ? 1 : (((i / stages) & 1) ^ 1);
                t0 = clock_now();
                u32 ok = bounded_wait(empty, parity, deadline, &tries);
                t1 = clock_now();
                if (!ok) {
                    emit(l, t1, OP_WAIT, 0, 8 + s, i, parity, t0, 0, 0, tries);
                    timed_out = 1;
                    break;
                }
            }
            u32 bytes = announced_bytes(tile_bytes, chunk_bytes, flags);
            u64 t_arrive = clock_now();
            u64 token = mbar_arrive_expect_tx(full, bytes);
            u64 t_load = clock_now();
            unsigned char* buf = bufs + s * tile_bytes;
            const unsigned char* g = (const unsigned char*)src + (u64)gtile * tile_bytes;
            for (u32 c = 0; c < chunks; c++)
                bulk_load(smem_u32(buf + c * chunk_bytes), g + c * chunk_bytes, chunk_bytes, full);
            // Logged only now, so logging never stands between an operation and the next one.
            if (waited) emit(l, t1, OP_WAIT, 0, 8 + s, i, parity, t0, 0, 1, tries);
            emit(l, t_arrive, OP_ARRIVE_EXPECT_TX, 0, s, i, bytes, 0, token,
                 mbar_pending_count(token), 0);
            emit(l, t_load, OP_TMA_LOAD, 0, s, i, tile_bytes, chunks, 0, 0, 0);
            flush(l);
            handled++;
        }
        flush(l);
        summary_put(summary, 0, handled, 0, timed_out, 1);
        return;
    }
    if (warp > consumers) return;
    u32 agent = warp;  // consumer0 is agent slot 1, consumer1 slot 2
    Log l = log_open(log, log_ctas, log_cap, agent, flags, bufs + stages * tile_bytes);
    u32 handled = 0, bad_tiles = 0, timed_out = 0;
    for (u32 i = 0; i < tiles; i++) {
        u32 s = i % stages;
        u32 gtile = blockIdx.x * tiles + i;
        u32 full = smem_u32(&bars[s]), empty = smem_u32(&bars[8 + s]);
        unsigned char* buf = bufs + s * tile_bytes;
        // consumer_wait
        u32 parity = (flags & BUG_FORGET_PHASE) ? 0 : ((i / stages) & 1);
        u64 t0 = clock_now();
        u32 tries;
        u32 ok = bounded_wait(full, parity, deadline, &tries);
        ok = __all_sync(FULL_MASK, ok);
        u64 t1 = clock_now();
        if (!ok) {
            if (lane == 0) emit(l, t1, OP_WAIT, agent, s, i, parity, t0, 0, 0, tries);
            timed_out = 1;
            break;
        }
        // use the tile (logged after, so logging never delays the read)
        Check c = verify_tile((const u32*)buf, gtile, words, chunk_words);
        if (lane == 0) {
            emit(l, t1, OP_WAIT, agent, s, i, parity, t0, 0, 1, tries);
            log_read(l, agent, s, i, words, c, t1 + 1);
            flush(l);  // while the tile is in use, not between release and the next wait
        }
        if (c.bad) bad_tiles++;
        __syncwarp();
        if (lane == 0) {
            u64 t = clock_now();
            bulk_store((unsigned char*)dst + (u64)gtile * tile_bytes, smem_u32(buf), tile_bytes);
            bulk_commit();
            emit(l, t, OP_TMA_STORE, agent, NO_BARRIER, i, tile_bytes, s, 0, 0, 0);
            bulk_wait_read(0);
            t = clock_now();
            emit(l, t, OP_WAIT_GROUP_READ, agent, NO_BARRIER, i, 0, s, 0, 0, 0);
            if (!(flags & BUG_SKIP_RELEASE)) {
                // consumer_release
                t = clock_now();
                u64 token = mbar_arrive(empty);
                emit(l, t, OP_ARRIVE, agent, 8 + s, i, 1, 0, token, mbar_pending_count(token), 0);
            }
        }
        __syncwarp();
        handled++;
    }
    if (lane == 0) {
        bulk_wait_all();
        flush(l);
        summary_put(summary, agent, handled, bad_tiles, timed_out, 1);
    }
}

// ------------------------------------------------------------------ scenario: proxy_fence_store

// One warp (the writer) fills a staging buffer with st.shared, runs fence.proxy.async.shared::cta
// (unless the bug drops it), and lane 0 writes the buffer out with a bulk store. `stages` buffers
// rotate; wait_group.read (stages - 1) frees the next one. The host compares the destination.
extern "C" __global__ void proxy_store_kernel(
        u32* dst, u64* log, u32* summary, u32 tiles, u32 tile_bytes, u32 stages, u32 flags,
        u32 log_ctas, u32 log_cap) {
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* bufs = smem + 128;
    u32 lane = threadIdx.x & 31;
    u32 words = tile_bytes / 4;
    Log l = log_open(log, log_ctas, log_cap, 0, flags, bufs + stages * tile_bytes);

    poison_smem(bufs, stages * tile_bytes);
    proxy_fence();
    __syncwarp();
    for (u32 i = 0; i < tiles; i++) {
        u32 s = i % stages;
        u32 gtile = blockIdx.x * tiles + i;
        u32* buf = (u32*)(bufs + s * tile_bytes);
        if (lane == 0) {
            bulk_wait_read(stages - 1);
            emit(l, clock_now(), OP_WAIT_GROUP_READ, 0, NO_BARRIER, i, stages - 1, s, 0, 0, 0);
        }
        __syncwarp();
        u64 t = clock_now();
        for (u32 w = lane; w < words; w += 32) buf[w] = (gtile << 16) | w;
        if (lane == 0) emit(l, t, OP_SMEM_WRITE, 0, NO_BARRIER, i, tile_bytes, s, 0, 0, 0);
        if (!(flags & BUG_MISSING_FENCE)) {
            t = clock_now();
            proxy_fence();
            if (lane == 0) emit(l, t, OP_PROXY_FENCE, 0, NO_BARRIER, i, 0, s, 0, 0, 0);
        }
        __syncwarp();
        if (lane == 0) {
            t = clock_now();
            bulk_store((unsigned char*)dst + (u64)gtile * tile_bytes, smem_u32(buf), tile_bytes);
            bulk_commit();
            emit(l, t, OP_TMA_STORE, 0, NO_BARRIER, i, tile_bytes, s, 0, 0, 0);
            flush(l);
        }
        __syncwarp();
    }
    if (lane == 0) {
        bulk_wait_all();
        emit(l, clock_now(), OP_WAIT_GROUP, 0, NO_BARRIER, tiles, 0, 0, 0, 0, 0);
        flush(l);
        summary_put(summary, 0, tiles, 0, 0, 1);
    }
}

// ------------------------------------------------------------------ bandwidth: the bare ring

// The double_buffer_tma ring with nothing logged or checked, one CTA per SM, tiles handed out
// grid-stride. The consumer lets `lag` bulk stores stay in flight before it releases their stage
// (lag 0: the textbook wait_group.read 0 before each consumer_release). Counts timeouts in
// `errors`.
extern "C" __global__ void tma_ring_bandwidth_kernel(
        const unsigned char* src, unsigned char* dst, u64 n_tiles, u32 tile_bytes, u32 stages,
        u32 lag, u64 deadline, u32* errors) {
    extern __shared__ __align__(128) unsigned char smem[];
    u64* bars = (u64*)smem;
    unsigned char* bufs = smem + 128;
    u32 warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (u32 s = 0; s < stages; s++) {
            mbar_init(smem_u32(&bars[s]), 1);
            mbar_init(smem_u32(&bars[8 + s]), 1);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (lane != 0 || warp > 1) return;
    u32 tries;
    u32 i = 0;
    if (warp == 0) {
        for (u64 t = blockIdx.x; t < n_tiles; t += gridDim.x, i++) {
            u32 s = i % stages;
            u32 full = smem_u32(&bars[s]);
            if (!bounded_wait(smem_u32(&bars[8 + s]), ((i / stages) & 1) ^ 1, deadline, &tries)) {
                atomicAdd(errors, 1u);
                return;
            }
            mbar_arrive_expect_tx(full, tile_bytes);
            bulk_load(smem_u32(bufs + s * tile_bytes), src + t * tile_bytes, tile_bytes, full);
        }
        return;
    }
    for (u64 t = blockIdx.x; t < n_tiles; t += gridDim.x, i++) {
        u32 s = i % stages;
        if (!bounded_wait(smem_u32(&bars[s]), (i / stages) & 1, deadline, &tries)) {
            atomicAdd(errors, 1u);
            return;
        }
        bulk_store(dst + t * tile_bytes, smem_u32(bufs + s * tile_bytes), tile_bytes);
        bulk_commit();
        if (i >= lag) {
            bulk_wait_read(lag);
            u32 r = (i - lag) % stages;
            mbar_arrive(smem_u32(&bars[8 + r]));
        }
    }
    // release what is still held, so nothing is left pending at exit
    bulk_wait_all();
}
"""

KERNEL_NAMES = (
    "single_barrier_kernel",
    "tma_ring_kernel",
    "proxy_store_kernel",
    "tma_ring_bandwidth_kernel",
)

COMPILE_OPTIONS = ("-std=c++17", "-arch=sm_90a")
