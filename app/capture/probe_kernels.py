"""The CUDA text of the tx-count probes (app.capture.probes): one-thread programs on one
mbarrier, the same questions at scale, the `.noComplete` probes and the CTA-lifetime probes,
built with NVRTC for sm_90a on the prelude the generated kernels use."""

from __future__ import annotations

from .codegen import prelude

SOURCE = prelude(logging=False) + r"""
__device__ __forceinline__ void spin_ns(u64 ns) {
    const u64 t0 = globaltimer_now();
    while (globaltimer_now() - t0 < ns) { }
}

// out[0]: phase 0 completed; out[1]: cycles until it did (or gave up); out[2], out[3]:
// test_wait.parity 1 at the end and (extra_copy_after_completion) before its last expect_tx, which
// is true exactly when the current parity is 0; out[7]: the thread got to the end.
extern "C" __global__ void tx_probe_kernel(const unsigned char* src, u64* out, u32 mode,
                                           u64 deadline) {
    __shared__ __align__(128) unsigned char buf[4096];
    __shared__ __align__(8) u64 bar_storage;
    if (threadIdx.x != 0) return;
    u32 bar = smem_u32(&bar_storage);
    u32 dst = smem_u32(buf);
    mbar_init(bar, 1);
    mbar_init_fence();
    u32 tries = 0;
    u64 start = clock_now();
    if (mode == 0) {            // exact
        mbar_arrive_expect_tx(bar, 4096);
        for (u32 c = 0; c < 4; c++) bulk_load(dst + c * 1024, src + c * 1024, 1024, bar);
    } else if (mode == 1) {     // short_racing
        mbar_arrive_expect_tx(bar, 3072);
        for (u32 c = 0; c < 4; c++) bulk_load(dst + c * 1024, src + c * 1024, 1024, bar);
    } else if (mode == 2) {     // short_one_copy
        mbar_arrive_expect_tx(bar, 3072);
        bulk_load(dst, src, 4096, bar);
    } else if (mode == 3) {     // extra_copy_after_completion
        mbar_arrive_expect_tx(bar, 3072);
        for (u32 c = 0; c < 3; c++) bulk_load(dst + c * 1024, src + c * 1024, 1024, bar);
    } else if (mode == 4) {     // complete_tx_first
        mbar_complete_tx(bar, 1024);
        mbar_arrive_expect_tx(bar, 1024);
    } else if (mode == 5) {     // copy_before_expect
        bulk_load(dst, src, 1024, bar);
        __nanosleep(20000);
        mbar_arrive_expect_tx(bar, 1024);
    } else {                    // long
        mbar_arrive_expect_tx(bar, 5120);
        for (u32 c = 0; c < 4; c++) bulk_load(dst + c * 1024, src + c * 1024, 1024, bar);
    }
    u32 done0 = bounded_wait_parity(bar, 0, deadline, &tries);
    out[0] = done0;
    out[1] = clock_now() - start;
    if (mode == 3 && done0) {
        bulk_load(dst + 3 * 1024, src + 3 * 1024, 1024, bar);
        __nanosleep(20000);
        out[3] = mbar_test_wait_parity(bar, 1);
        mbar_arrive_expect_tx(bar, 1024);
    }
    __nanosleep(20000);
    out[2] = mbar_test_wait_parity(bar, 1);
    out[7] = 1;
}

// Tallies (counts[]): 0 completed with every byte, 1 completed early (before the last bytes'
// complete-tx), 2 never completed within `deadline`, 3 completed and a reader right after the
// wait still found never-written words, 4 bytes that had not landed long after (none expected).
// With `reuse`: warp 0 arrives twice back to back on a barrier of count 1 (two phases complete)
// while warp 1 waits for phase 0 (parity 0): 0 the waiter saw the phase, 2 it missed it.
extern "C" __global__ void tx_scale_kernel(const unsigned char* src, u32* counts, u32 announced,
                                           u32 n_copies, u32 copy_bytes, u32 gap_ns,
                                           u32 phases, u64 deadline, u32 reuse) {
    __shared__ __align__(128) unsigned char buf[4096];
    __shared__ __align__(8) u64 bar_storage;
    const u32 bar = smem_u32(&bar_storage), dst = smem_u32(buf);
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const u32 words = n_copies * copy_bytes / 4;
    volatile u32* w = (volatile u32*)buf;
    u32 tally[5] = {0, 0, 0, 0, 0};
    for (u32 p = 0; p < phases; p++) {
        for (u32 i = threadIdx.x; i < 1024; i += blockDim.x) w[i] = POISON;
        proxy_fence();
        if (threadIdx.x == 0) {
            if (p) mbar_inval(bar);
            mbar_init(bar, 1);
            mbar_init_fence();
        }
        __syncthreads();
        if (reuse) {
            u32 tries;
            if (warp == 0 && lane == 0) { mbar_arrive(bar, 1); mbar_arrive(bar, 1); }
            if (warp == 1 && lane == 0)
                tally[bounded_wait_parity(bar, 0, deadline, &tries) ? 0 : 2]++;
            __syncthreads();
            continue;
        }
        if (warp == 0) {
            u32 ok = 0, tries;
            if (lane == 0) {
                mbar_arrive_expect_tx(bar, announced);
                for (u32 c = 0; c < n_copies; c++) {
                    if (c && gap_ns) spin_ns(gap_ns);
                    bulk_load(dst + c * copy_bytes, src + c * copy_bytes, copy_bytes, bar);
                }
                ok = bounded_wait_parity(bar, 0, deadline, &tries);
            }
            ok = __shfl_sync(FULL_MASK, ok, 0);
            u32 missing = 0;   // what a reader sees right after the wait returned
            if (ok) for (u32 i = lane; i < words; i += 32) missing += w[i] == POISON;
            missing = __any_sync(FULL_MASK, missing != 0);
            // every byte lands before the barrier is re-initialized
            const u64 t0 = clock_now();
            bool landed = false;
            while (!landed && clock_now() - t0 < deadline) {
                u32 still = 0;
                for (u32 i = lane; i < words; i += 32) still += w[i] == POISON;
                landed = !__any_sync(FULL_MASK, still != 0);
            }
            __nanosleep(2000);   // and its complete-tx reaches the barrier
            if (lane == 0) {
                tally[!ok ? 2 : (announced < n_copies * copy_bytes ? 1 : 0)]++;
                if (ok && missing) tally[3]++;
                if (!landed) tally[4]++;
            }
        }
        __syncthreads();
    }
    if (lane == 0 && warp == (reuse ? 1u : 0u))
        for (u32 i = 0; i < 5; i++) atomicAdd(&counts[i], tally[i]);
}

__device__ __forceinline__ u64 mbar_arrive_no_complete(u32 bar, u32 count) {
    u64 state;
    asm volatile("mbarrier.arrive.noComplete.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state) : "r"(bar), "r"(count) : "memory");
    return state;
}

// `.noComplete` (one thread). `out` is mapped host memory and out[0] says how far the thread
// got (1: about to arrive.noComplete, 2: it returned, 3: a later plain arrive returned, 4: the
// end), so what was written before a trap survives it. Mode 0: init 1, arrive.noComplete 1 (it
// completes the phase: PTX leaves that undefined), then a plain arrive. Mode 1: init 2, a plain
// arrive, then arrive.noComplete 1 (the last arrival), then a plain arrive. Mode 2: init 3, two
// arrive.noComplete tokens and mbarrier.pending_count of each. out[1], out[6], out[10]: the
// barrier's 64-bit word before, after the noComplete arrive and after the later arrive (the
// object is opaque in PTX: kept for the record, never interpreted).
extern "C" __global__ void nc_probe_kernel(volatile u64* out, u32 mode) {
    __shared__ __align__(8) u64 bar_storage;
    if (threadIdx.x != 0) return;
    const u32 bar = smem_u32(&bar_storage);
    volatile u64* word = (volatile u64*)&bar_storage;
    if (mode == 2) {
        mbar_init(bar, 3);
        mbar_init_fence();
        const u64 s1 = mbar_arrive_no_complete(bar, 1);
        const u64 s2 = mbar_arrive_no_complete(bar, 1);
        out[2] = s1;
        out[3] = mbar_pending_count(s1);
        out[7] = s2;
        out[8] = mbar_pending_count(s2);
        out[4] = mbar_test_wait_parity(bar, 0);
        __threadfence_system();
        out[0] = 4;
        return;
    }
    mbar_init(bar, mode == 0 ? 1 : 2);
    mbar_init_fence();
    if (mode == 1) mbar_arrive(bar, 1);
    out[1] = *word;
    __threadfence_system();
    out[0] = 1;
    __threadfence_system();
    const u64 st = mbar_arrive_no_complete(bar, 1);
    out[2] = st;
    out[3] = mbar_pending_count(st);
    out[4] = mbar_test_wait_parity(bar, 0);   // phase 0 completed
    out[5] = mbar_test_wait_token(bar, st);   // the token's phase completed
    out[6] = *word;
    __threadfence_system();
    out[0] = 2;
    __threadfence_system();
    const u64 st2 = mbar_arrive(bar, 1);      // a later plain arrive
    out[7] = st2;
    out[8] = mbar_test_wait_parity(bar, 0);
    out[9] = mbar_test_wait_parity(bar, 1);
    out[10] = *word;
    __threadfence_system();
    out[0] = 3;
    __nanosleep(20000);
    out[11] = mbar_test_wait_parity(bar, 0);
    __threadfence_system();
    out[0] = 4;
}

// CTA lifetime, in 2-CTA clusters (cuLaunchKernelEx, cluster dimension 2). Both CTAs initialize
// their barrier (count 1) and meet at one cluster barrier; then CTA 1's threads exit at once
// (no cluster barrier before exit), and CTA 0's thread 0 waits `delay_ns` and reaches into
// CTA 1: mode 1 arrives remotely on CTA 1's barrier (mapa + arrive.release.cluster), mode 2
// multicasts a 1 KiB bulk copy into both CTAs (ctaMask 0b11, completing tx on each CTA's
// barrier at the same offset) and waits (bounded) for its own half, mode 3 arrives remotely
// and exits with no fence after it. Mode 0 is the control: CTA 1 waits (bounded) for CTA 0's
// remote arrive before it exits. Per cluster, EXIT_WORDS words of `out` (mapped host memory):
// 0 how far CTA 0 got (1: about to reach into CTA 1, 2: past the fence after it), 7 the
// remote instruction returned (3: written right after it, with no fence in between), 1 CTA
// 0's %clock64 at the remote operation, 4 CTA 1's at its exit (both counted from the cluster
// barrier's release, which both SMs leave together), 2 and 3 the same two moments in
// %globaltimer, 5 (mode 0) CTA 1 saw the arrive, 6 (mode 2) CTA 0's own half: 2 landed,
// 1 its bounded wait gave up, 0 never written.
#define EXIT_WORDS 8
extern "C" __global__ void __launch_bounds__(32, 1) exit_probe_kernel(
        volatile u64* out, const unsigned char* src, u32 mode, u64 delay_ns, u64 deadline) {
    __shared__ __align__(128) unsigned char buf[1024];
    __shared__ __align__(8) u64 bar_storage;
    const u32 rank = cluster_rank();
    volatile u64* o = out + (u64)(blockIdx.x / 2) * EXIT_WORDS;
    const u32 bar = smem_u32(&bar_storage);
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    cluster_sync();
    const u64 t0 = clock_now();
    if (rank == 1) {
        if (threadIdx.x == 0) {
            u32 ok = 0, tries = 0;
            if (mode == 0) ok = bounded_wait_parity(bar, 0, deadline, &tries);
            o[5] = ok;
            o[3] = globaltimer_now();
            o[4] = clock_now() - t0;
        }
        return;
    }
    if (threadIdx.x != 0) return;
    spin_ns(delay_ns);
    const u32 remote = mapa_u32(bar, 1);
    o[2] = globaltimer_now();
    o[1] = clock_now() - t0;
    __threadfence_system();
    o[0] = 1;
    __threadfence_system();
    if (mode == 2) {
        mbar_arrive_expect_tx(bar, 1024);
        bulk_load_multicast(smem_u32(buf), src, 1024, bar, (unsigned short)3);
        o[7] = 3;
        u32 tries = 0;
        o[6] = 1 + bounded_wait_parity(bar, 0, deadline, &tries);
    } else {
        mbar_arrive_cluster(remote, 1);
        o[7] = 3;
        if (mode == 3) return;
    }
    __threadfence_system();
    o[0] = 2;
}
"""
