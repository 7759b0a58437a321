"""Probes of the tx-count on a real Hopper GPU: what the hardware does where the model's answer
rests on docs/semantics.md alone (bytes landing before their `expect_tx`, more or fewer bytes than
announced, a barrier reused before anyone waited on its phase).

Two kinds, both in `traces/probes.json`:

- `probes`: one thread drives one mbarrier through one small program, once, each launch in a
  process of its own (a trap loses the context); whether the phase completed, the parity after.
- `scale`: the same questions asked 132 CTAs x 1,000 phases at once (one CTA per SM, the barrier
  re-initialized each phase), counting how often a phase completed with every byte, completed
  early (before the last bytes' complete-tx: a reader may find the tile partly written) or
  never (the count stepped over zero: a hang). Beside each row, `model` says which of those the
  schedule checker finds reachable in the same program written in the pipeline language
  (`--model-only` computes it on a machine without a GPU). Announcing N bytes for one 4,096-byte
  copy, for N down to 16, shows the size of the pieces in which a copy's bytes reach the
  tx-count (`granularity`); `reuse_before_wait` races a waiter against two back-to-back phases.

    python -m app.capture.probes --out traces/probes.json          # on a GPU machine
    python -m app.capture.probes --out traces/probes.json --model-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .codegen import COMPILE_OPTIONS, prelude

PROBES = {
    "exact": "arrive.expect_tx 4096, then four 1024-byte copies: the textbook phase.",
    "short_racing": "arrive.expect_tx 3072, then four 1024-byte copies issued back to back.",
    "short_one_copy": "arrive.expect_tx 3072, then one 4096-byte copy.",
    "extra_copy_after_completion": "arrive.expect_tx 3072, three copies, wait for the phase, "
                                   "then a fourth copy that no expect_tx announced; then "
                                   "arrive.expect_tx 1024 on the new phase.",
    "complete_tx_first": "mbarrier.complete_tx 1024 (tx-count -1024), then arrive.expect_tx 1024.",
    "copy_before_expect": "a 1024-byte copy lands first (nothing announced), then "
                          "arrive.expect_tx 1024.",
    "long": "arrive.expect_tx 5120, then four 1024-byte copies: the phase must not complete.",
}

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

CTAS = 132
PHASES = 1000
SCALE = [
    # (probe, program, announced, copies, copy bytes, gap ns)
    ("exact", "arrive.expect_tx 4096, then four 1,024-byte copies back to back", 4096, 4, 1024, 0),
    ("exact_one_copy", "arrive.expect_tx 4096, then one 4,096-byte copy", 4096, 1, 4096, 0),
    ("short_one_copy", "arrive.expect_tx 3072, then one 4,096-byte copy", 3072, 1, 4096, 0),
    ("short_racing", "arrive.expect_tx 3072, then four 1,024-byte copies back to back",
     3072, 4, 1024, 0),
    ("short_spaced", "arrive.expect_tx 3072, then four 1,024-byte copies 3 us apart",
     3072, 4, 1024, 3000),
    ("long", "arrive.expect_tx 5120, then four 1,024-byte copies", 5120, 4, 1024, 0),
]
PIECES = [16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 3584, 3968, 4032, 4064, 4080]
"""Bytes announced for one 4,096-byte copy: early completion needs a piece boundary there."""
DEADLINE_CYCLES = 100_000  # about 50 us: a 4 KiB copy lands in about 1 us


def probe_pipeline(announced: int, copies: int, copy_bytes: int, chunk_bytes: int = 1024) -> str:
    """The probe's program in the pipeline language, for the schedule checker."""
    loads = "\n".join(
        "    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
        f"[smem[0] + {c * copy_bytes}], [tile[0]], {copy_bytes}, [full_barrier[0]];"
        for c in range(copies))
    total = copies * copy_bytes
    chunk = min(chunk_bytes, copy_bytes)
    return (f"// A tx-count probe: announce {announced} bytes, then {copies} copies of "
            f"{copy_bytes}.\n"
            f"tensor  tile[1] bytes {total};\n"
            f"smem    smem[1] bytes {total} chunk {chunk};\n"
            "barrier full_barrier[1] = 1;\n\n"
            "agent thread {\n"
            "    mbarrier.arrive.expect_tx.shared::cta.b64 _, [full_barrier[0]], "
            f"{announced};\n{loads}\n"
            "    mbarrier.try_wait.parity.shared::cta.b64 _, [full_barrier[0]], 0;\n"
            "    ld.shared x, [smem[0]], tile[0];\n"
            "}\n")


def model(announced: int, copies: int, copy_bytes: int, chunk_bytes: int = 1024) -> dict:
    """What the checker finds reachable for the probe's program: `completed` (a schedule ends
    cleanly), `early` (`partial_read`: the phase completed before every byte) and `hung`
    (`deadlock`)."""
    from app.check.engine import Explorer, Limits
    from app.lang.compiler import MAX_CHUNKS
    from app.scenarios import from_source

    chunk_bytes = max(chunk_bytes, copy_bytes * copies // MAX_CHUNKS)  # the engine's limit
    text = probe_pipeline(announced, copies, copy_bytes, chunk_bytes)
    cfg = from_source(text).resolve({}, [])
    out = Explorer(cfg).explore(Limits(timeout_s=30.0))
    kinds = set(out.found)
    reachable = []
    if out.verdict == "safe" or not kinds & {"deadlock", "partial_read", "undefined_behavior"}:
        reachable.append("completed")
    if "partial_read" in kinds:
        reachable.append("early")
    if "deadlock" in kinds:
        reachable.append("hung")
    return {"reachable": reachable, "diagnostics": sorted(kinds), "complete": out.complete,
            "states": out.states, "chunk_bytes": min(chunk_bytes, copy_bytes), "pipeline": text}


NO_COMPLETE = {
    # probe: (kernel mode, init count, what the program does)
    "no_complete": (0, 1, "init 1, then mbarrier.arrive.noComplete 1: it completes the phase "
                          "(PTX 9.7.13.15.13: undefined); then a plain arrive"),
    "no_complete_last": (1, 2, "init 2, a plain arrive, then mbarrier.arrive.noComplete 1 as "
                               "the last arrival (undefined); then a plain arrive"),
    "pending_count": (2, 3, "init 3, two mbarrier.arrive.noComplete tokens, then "
                            "mbarrier.pending_count.b64 of each"),
}
"""The `.noComplete` probes: one thread, one barrier, each launch in a process of its own."""

EXIT_CLUSTERS = 66
"""2-CTA clusters a launch: one CTA per SM of the H200's 132."""
EXIT_LAUNCHES = 4
"""Launches of each remote_after_exit variant (a trap ends a process: then a fresh one)."""
EXIT = {
    # probe: (kernel mode, delay in us, program)
    "peer_alive": (0, 0, "control: CTA 1 waits (bounded) for CTA 0's remote arrive, then exits"),
    "arrive_0us": (1, 0, "CTA 1 exits at once; CTA 0 arrives remotely on its barrier at once"),
    "arrive_1us": (1, 1, "CTA 1 exits at once; CTA 0 arrives remotely on its barrier 1 us later"),
    "arrive_10us": (1, 10, "CTA 1 exits at once; CTA 0 arrives remotely 10 us later"),
    "arrive_100us": (1, 100, "CTA 1 exits at once; CTA 0 arrives remotely 100 us later"),
    "arrive_then_exit_100us": (3, 100, "CTA 1 exits at once; CTA 0 arrives remotely 100 us "
                                       "later and exits with no fence after the arrive"),
    "multicast_100us": (2, 100, "CTA 1 exits at once; 100 us later CTA 0 multicasts a 1 KiB "
                                "bulk copy into both CTAs (ctaMask 0b11) and waits for its own"),
}
"""The remote_after_exit probes, in the order they run (the multicast last)."""
EXIT_DEADLINE_CYCLES = 4_000_000  # about 2 ms: every in-kernel wait gives up by then
EXIT_HOST_BOUND_S = 3.0
"""A launch not finished by then is `hung` (the child reports it and exits)."""
EXIT_WORDS = 8


DIFFERENCES = {
    "hung": "On the H200 a remote arrive or multicast copy into a CTA that has exited never "
            "completes, and the launch hangs; the engine names the access `remote_after_exit` "
            "(the verdict is unsafe either way) but applies it to the exited CTA's barrier and "
            "runs on, so its run ends `done`, not hung.",
}
"""An ending silicon showed that the model cannot reach -> the sentence that says so. A row
whose silicon ending is not among the model's ships only with its sentence here (in
`model.differs`), as a replay that does not match ships only with its sentence in
app.capture.ship.DIFFERENCES."""


def no_complete_pipeline(probe: str) -> str:
    """The `.noComplete` probe's program in the pipeline language."""
    _, count, what = NO_COMPLETE[probe]
    head = f"// {what}\nbarrier bar = {count};\n\nagent thread {{\n"
    nc = "    mbarrier.arrive.noComplete.shared::cta.b64 {}, [bar], 1;\n"
    plain = "    mbarrier.arrive.shared::cta.b64 _, [bar];\n"
    if probe == "pending_count":
        return head + nc.format("s1") + nc.format("s2") + "}\n"
    body = (plain if probe == "no_complete_last" else "") + nc.format("s") + plain
    return head + body + "}\n"


def exit_pipeline(probe: str) -> str:
    """The remote_after_exit probe's program in the pipeline language (a delay is a schedule
    choice: the language has no clock, so every delay is the same program)."""
    mode, _, what = EXIT[probe]
    head = (f"// {what}\ncluster 2;\n"
            + ("tensor  tile[1] bytes 1024;\nsmem    s[1] bytes 1024 chunk 1024;\n"
               if mode == 2 else "")
            + "barrier bar[1] = 1;\n\nagent thread {\n")
    if mode == 0:
        body = ("    if (cta == 0) {\n"
                "        mbarrier.arrive.release.cluster.shared::cluster.b64 _, "
                "[mapa(bar[0], 1)];\n"
                "    } else {\n"
                "        mbarrier.try_wait.parity.shared::cta.b64 _, [bar[0]], 0;\n"
                "    }\n")
    elif mode in (1, 3):
        body = ("    if (cta == 0) {\n"
                "        mbarrier.arrive.release.cluster.shared::cluster.b64 _, "
                "[mapa(bar[0], 1)];\n"
                "    }\n")
    else:
        body = ("    if (cta == 0) {\n"
                "        mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar[0]], 1024;\n"
                "        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                ".multicast::cluster [s[0]], [tile[0]], 1024, [bar[0]], 3;\n"
                "        mbarrier.try_wait.parity.shared::cta.b64 _, [bar[0]], 0;\n"
                "    }\n")
    return head + body + "}\n"


def endings(cfg, max_states: int = 100_000) -> list[dict]:
    """Every way a small program can end, over every schedule: each end status with the
    diagnostics raised on the way (a depth-first search over the engine's own moves; the
    programs here have a handful of states)."""
    from app.sim.machine import RUNNING, Machine

    machine = Machine(cfg)
    seen: set = set()
    found: set = set()

    def search(frozen: tuple, kinds: frozenset) -> None:
        if (frozen, kinds) in seen or len(seen) > max_states:
            return
        seen.add((frozen, kinds))
        machine.thaw(frozen)
        if machine.status != RUNNING:
            found.add((machine.status, kinds))
            return
        for move in list(machine.ready):
            machine.thaw(frozen)
            record = machine.step(move)
            more = frozenset(d.get("rule") or d["kind"] for d in record["diagnostics"])
            search(machine.freeze(), kinds | more)

    search(machine.freeze(), frozenset())
    return [{"status": status, "diagnostics": sorted(kinds)}
            for status, kinds in sorted(found, key=lambda e: (e[0], sorted(e[1])))]


def ending_name(ending: dict) -> str:
    """One word for an ending, in the words the probe rows use: a rule or diagnostic that
    names what went wrong (`no_complete`, `remote_after_exit`), `deadlock`, or `done`."""
    for kind in ending["diagnostics"]:
        if kind in ("no_complete", "remote_after_exit"):
            return kind
    return "done" if ending["status"] == "done" and not ending["diagnostics"] else \
        (ending["diagnostics"] or [ending["status"]])[0]


def program_model(text: str) -> dict:
    """What the checker says about a probe's program (verdict, kinds found, states) and every
    ending a schedule reaches (`endings`), named in `reachable`."""
    from app.check.engine import Explorer, Limits
    from app.scenarios import from_source

    cfg = from_source(text).resolve({}, [])
    out = Explorer(cfg).explore(Limits(timeout_s=30.0))
    ends = endings(cfg)
    return {"pipeline": text, "verdict": out.verdict, "found": sorted(out.found),
            "complete": out.complete, "states": out.states, "endings": ends,
            "reachable": sorted({ending_name(e) for e in ends})}


def pending_count_model() -> list[int]:
    """`POST /api/v1/mbarrier/run`'s answer for the pending_count probe: the pending count of
    each `arrive.noComplete` token (PTX 9.7.13.15.17: prior to that arrive)."""
    from app.api.routes.mbarrier import RunRequest, run_ops

    ops = [{"op": "init", "count": 3},
           {"op": "arrive", "token": "s1", "no_complete": True},
           {"op": "arrive", "token": "s2", "no_complete": True},
           {"op": "pending_count", "token": "s1"}, {"op": "pending_count", "token": "s2"}]
    states = run_ops(RunRequest.model_validate({"ops": ops}).ops)
    return [s["pending_count"] for s in states if s["op"] == "pending_count"]


# ------------------------------------------------------------------------------ on the GPU


def run_probe(mode: str) -> dict:
    """One single-thread probe in this process (needs CuPy and a Hopper GPU)."""
    import cupy

    kernel = cupy.RawKernel(SOURCE, "tx_probe_kernel", options=COMPILE_OPTIONS)
    src = cupy.arange(1024, dtype=cupy.uint32).view(cupy.uint8)
    out = cupy.zeros(8, dtype=cupy.uint64)
    result = {"probe": mode, "program": PROBES[mode], "error": None}
    try:
        kernel((1,), (32,), (src, out, cupy.uint32(list(PROBES).index(mode)),
                             cupy.uint64(2_000_000)))
        cupy.cuda.Device().synchronize()
        words = [int(v) for v in out.get()]
    except Exception as exc:  # a trap: the context is gone, say which error it was
        result["error"] = type(exc).__name__ + ": " + str(exc).splitlines()[0][:200]
        return result
    result.update({
        "phase0_completed": bool(words[0]),
        "cycles": words[1],
        "parity_at_end": 0 if words[2] else 1,
        "parity_before_expect": (0 if words[3] else 1)
        if mode == "extra_copy_after_completion" else None,
        "finished": bool(words[7]),
    })
    return result


def run_scale() -> dict:
    """Every scale row and the piece-size and reuse rows, in this process (needs a GPU)."""
    import cupy
    import numpy as np

    kernel = cupy.RawKernel(SOURCE, "tx_scale_kernel", options=COMPILE_OPTIONS)
    src = cupy.arange(1024, dtype=cupy.uint32).view(cupy.uint8)

    def tally(announced, copies, copy_bytes, gap, reuse=0) -> dict:
        counts = cupy.zeros(8, dtype=cupy.uint32)
        kernel((CTAS,), (64,), (src, counts, np.uint32(announced), np.uint32(copies),
                                np.uint32(copy_bytes), np.uint32(gap), np.uint32(PHASES),
                                np.uint64(DEADLINE_CYCLES), np.uint32(reuse)))
        cupy.cuda.Device().synchronize()
        c = [int(v) for v in counts.get()]
        phases = CTAS * PHASES
        return {"phases": phases, "completed": c[0], "early": c[1], "hung": c[2],
                "partial_seen": c[3], "not_landed": c[4],
                "rates": {k: round(c[i] / phases, 4)
                          for i, k in ((0, "completed"), (1, "early"), (2, "hung"))}}

    rows = []
    for probe, program, announced, copies, copy_bytes, gap in SCALE:
        rows.append({"probe": probe, "program": program, "announced": announced,
                     "copies": [copy_bytes] * copies, "gap_ns": gap,
                     **tally(announced, copies, copy_bytes, gap)})
    pieces = []
    for n in PIECES:
        pieces.append({"probe": f"announce_{n}", "announced": n, "copies": [4096], "gap_ns": 0,
                       "program": f"arrive.expect_tx {n}, then one 4,096-byte copy",
                       **tally(n, 1, 4096, 0)})
    reuse = tally(0, 0, 16, 0, reuse=1)
    return {"rows": rows, "pieces": pieces, "reuse": reuse}


def run_no_complete(probe: str) -> dict:
    """One `.noComplete` probe in this process (needs CuPy and a Hopper GPU): what the thread
    wrote to mapped host memory, which survives a trap, and the launch's error if any."""
    import cupy
    import numpy as np

    from .device import MappedBuffer, cuda_error_name

    mode, _, what = NO_COMPLETE[probe]
    kernel = cupy.RawKernel(SOURCE, "nc_probe_kernel", options=COMPILE_OPTIONS)
    kernel.compile()
    out = MappedBuffer(16 * 8)
    result = {"probe": probe, "program": what, "error": None}
    try:
        kernel((1,), (32,), (np.uint64(out.device_ptr), np.uint32(mode)))
        cupy.cuda.Device().synchronize()
    except Exception as exc:  # a trap: the context is gone, the mapped words are not
        result["error"] = {"name": cuda_error_name(exc), "message": str(exc).splitlines()[0]}
    w = [int(v) for v in out.view(np.uint64)]
    result["reached"] = w[0]
    if probe == "pending_count":
        result.update({"tokens": [hex(w[2]), hex(w[7])], "pending_count": [w[3], w[8]],
                       "phase0_completed": bool(w[4])})
        return result
    result.update({
        "word_before": hex(w[1]),
        "no_complete_returned": w[0] >= 2,
        "token": hex(w[2]) if w[0] >= 2 else None,
        "token_parity": w[2] >> 63 if w[0] >= 2 else None,
        "pending_count": w[3] if w[0] >= 2 else None,
        "phase0_completed": bool(w[4]) if w[0] >= 2 else None,
        "token_phase_completed": bool(w[5]) if w[0] >= 2 else None,
        "word_after": hex(w[6]) if w[0] >= 2 else None,
        "later_arrive_returned": w[0] >= 3,
        "later_token_parity": w[7] >> 63 if w[0] >= 3 else None,
        # test_wait.parity p is true when the current parity is not p
        "parity_after_later_arrive": (0 if w[9] else 1) if w[0] >= 3 else None,
        "word_after_later_arrive": hex(w[10]) if w[0] >= 3 else None,
        "parity_at_end": (1 if w[11] else 0) if w[0] >= 4 else None,
        "finished": w[0] >= 4,
    })
    return result


def run_exit(probe: str, launches: int) -> dict:
    """Up to `launches` launches of one remote_after_exit variant in this process, stopping at
    the first that fails (a trap ends the context) or does not finish within
    EXIT_HOST_BOUND_S (`hung`: the child then reports and exits at once)."""
    import time

    import cupy
    import numpy as np

    from .device import MappedBuffer, cuda_error_name
    from .gen_runner import launch

    mode, delay_us, _ = EXIT[probe]
    fn = cupy.RawKernel(SOURCE, "exit_probe_kernel", options=COMPILE_OPTIONS)
    fn.compile()
    src = cupy.arange(256, dtype=cupy.uint32).view(cupy.uint8)
    out = MappedBuffer(EXIT_CLUSTERS * EXIT_WORDS * 8)
    words = out.view(np.uint64).reshape(EXIT_CLUSTERS, EXIT_WORDS)
    runs = []
    for _ in range(launches):
        words[:] = 0
        run = {"ending": "finished", "error": None}
        args = (np.uint64(out.device_ptr), src, np.uint32(mode), np.uint64(delay_us * 1000),
                np.uint64(EXIT_DEADLINE_CYCLES))
        done = cupy.cuda.Event()
        try:
            launch(fn, 2 * EXIT_CLUSTERS, 32, 0, 2, args)
            done.record()
            start = time.perf_counter()
            while not done.done and time.perf_counter() - start < EXIT_HOST_BOUND_S:
                time.sleep(0.001)
            if not done.done:
                run["ending"] = "hung"
            else:
                done.synchronize()
        except Exception as exc:
            run["ending"] = "trapped"
            run["error"] = {"name": cuda_error_name(exc), "message": str(exc).splitlines()[0]}
        w = words.copy()
        recorded = (w[:, 4] > 0) & (w[:, 0] >= 1)
        gap = (w[:, 1].astype(np.int64) - w[:, 4].astype(np.int64))[recorded]
        run.update({
            "clusters": EXIT_CLUSTERS,
            "reached": int((w[:, 0] >= 1).sum()),
            "returned": int((w[:, 0] >= 2).sum()),
            "peer_exit_recorded": int((w[:, 4] > 0).sum()),
            "after_peer_exit": int((gap > 0).sum()),
            "gap_cycles": ({"min": int(gap.min()), "median": int(np.median(gap)),
                            "max": int(gap.max())} if gap.size else None),
            "remote_returned": int((w[:, 7] == 3).sum()),
            "peer_saw_arrive": int(w[:, 5].sum()) if mode == 0 else None,
            "own_half_landed": int((w[:, 6] == 2).sum()) if mode == 2 else None,
            "own_half_gave_up": int((w[:, 6] == 1).sum()) if mode == 2 else None,
        })
        runs.append(run)
        if run["ending"] != "finished":
            break
    return {"probe": probe, "runs": runs}


def _scale_doc(measured: dict | None, previous: dict | None) -> dict:
    """The `scale`, `granularity` and `reuse_before_wait` parts of probes.json, each row with
    its `model`; `measured` None keeps the previous file's figures (`--model-only`)."""
    prev = previous or {}
    if measured is None:
        rows = (prev.get("scale") or {}).get("rows", [])
        pieces = (prev.get("granularity") or {}).get("rows", [])
        earlier = prev.get("reuse_before_wait") or {}
        reuse = earlier.get("measured") or earlier.get("counts")
    else:
        rows, pieces, reuse = measured["rows"], measured["pieces"], measured["reuse"]
    early = [r["announced"] for r in pieces if r.get("early")]
    smallest = min(early) if early else None
    for row in rows:
        row["model"] = model(row["announced"], len(row["copies"]), row["copies"][0])
    for row in pieces:  # the model given silicon's own piece size as its chunk
        row["model"] = model(row["announced"], 1, row["copies"][0], smallest or 1024)
    doc = {
        "scale": {"ctas": CTAS, "phases_per_cta": PHASES, "rows": rows},
        "granularity": {
            "piece_bytes": smallest,
            "rows": pieces,
            "evidence": _granularity(pieces, smallest),
        },
    }
    if reuse:
        missed = reuse.get("hung", 0)
        doc["reuse_before_wait"] = {
            "program": "warp 0 arrives twice back to back on a barrier of count 1 (phases 0 "
                       "and 1 complete) while warp 1 waits for phase 0 with try_wait.parity 0",
            "phases": reuse.get("phases"),
            "counts": {"saw_phase_0": reuse.get("completed"), "missed_it": missed},
            "measured": reuse,
            "outcome": (f"No trap, no error: the waiter saw phase 0 in {reuse.get('completed')} "
                        f"of {reuse.get('phases')} phases and missed it (the parity was back to "
                        f"0; it waited until its bound) in {missed}."),
            "model": "The engine names this `reuse_before_wait` at the second arrive (phase 0 "
                     "completed and no wait observed it), and the checker finds the waiter's "
                     "deadlock.",
        }
    return doc


def _granularity(pieces: list[dict], smallest: int | None) -> str:
    """What the piece rows say about the size of the pieces, in one sentence."""
    if not smallest:
        return "No announcement below the copy's size ever completed early."
    never = [r["announced"] for r in pieces if not r.get("early")]
    return (f"Announcing N bytes for one 4,096-byte copy completed the phase early for N = "
            f"{smallest} and up, but never for N = {', '.join(f'{n:,}' for n in never)}: a "
            f"copy's bytes reach the tx-count in pieces of {smallest} bytes or a multiple. The "
            "built-in pipelines group by chunk_bytes (1,024 by default), coarser than silicon, so "
            f"these rows' model uses {smallest}-byte chunks.")


SECTIONS = ("probes", "scale", "no_complete", "remote_after_exit")
"""What `--only` can measure again: the one-thread tx probes, the rows at scale (with the piece
sizes and reuse before a wait), the `.noComplete` probes, the CTA-lifetime probes."""


def _no_complete_doc(measured: list[dict] | None, previous: dict | None) -> dict:
    """The `no_complete` part of probes.json: each `.noComplete` probe as silicon ran it, beside
    the model (`--model-only`: the previous measurements)."""
    rows = measured if measured is not None else \
        [dict(r) for r in ((previous or {}).get("no_complete") or {}).get("rows", [])]
    for row in rows:
        row["model"] = program_model(no_complete_pipeline(row["probe"]))
        if row["probe"] == "pending_count":
            row["model"]["pending_count"] = pending_count_model()
        row["silicon"] = _no_complete_seen(row)
        row["outcome"] = _no_complete_outcome(row)
    return {"no_complete": {
        "program": "one thread, one barrier, each launch in a process of its own; the thread "
                   "writes what it saw to mapped host memory, which survives a trap",
        "rows": rows}}


def _no_complete_seen(row: dict) -> list[str]:
    """What silicon showed, in the words of the model's `reachable`: where the undefined
    arrive ran, `no_complete` (PTX leaves what follows undefined, so any behaviour is that
    ending); the pending_count probe ends `done`."""
    if row["probe"] == "pending_count":
        return ["done"] if row.get("reached") == 4 and not row.get("error") else []
    return ["no_complete"] if row.get("reached", 0) >= 1 else []


def _no_complete_outcome(row: dict) -> str:
    """One sentence: what the H200 did."""
    error = row.get("error")
    trap = f"trapped ({error['name']}: {error['message']})" if error else "no trap"
    if row["probe"] == "pending_count":
        return (f"pending_count read {row.get('pending_count')} ({trap}); the model reads "
                f"{(row.get('model') or {}).get('pending_count')}.")
    if not row.get("no_complete_returned"):
        return f"The noComplete arrive never returned: {trap}."
    done = "completed" if row.get("phase0_completed") else "did not complete"
    text = (f"The noComplete arrive returned and phase 0 {done} (token parity "
            f"{row.get('token_parity')}, pending_count {row.get('pending_count')}); ")
    if row.get("later_arrive_returned"):
        text += (f"a later plain arrive returned too (parity after it "
                 f"{row.get('parity_after_later_arrive')}, at the end "
                 f"{row.get('parity_at_end')}); {trap}.")
    else:
        text += f"the later plain arrive did not return: {trap}."
    return text


def _exit_doc(measured: list[dict] | None, previous: dict | None) -> dict:
    """The `remote_after_exit` part of probes.json: each variant's launches summed, beside the
    model (`--model-only`: the previous measurements)."""
    if measured is None:
        rows = [dict(r) for r in ((previous or {}).get("remote_after_exit") or {}).get("rows",
                                                                                     [])]
    else:
        rows = [_exit_row(m) for m in measured]
    for row in rows:
        row["model"] = program_model(exit_pipeline(row["probe"]))
        differs = {k: DIFFERENCES[k] for k in row.get("silicon") or []
                   if k not in row["model"]["reachable"] and k in DIFFERENCES}
        if differs:
            row["model"]["differs"] = differs
    return {"remote_after_exit": {
        "program": f"{EXIT_CLUSTERS} clusters of 2 CTAs a launch; CTA 1 exits right after "
                   "the start cluster barrier, CTA 0 reaches into it after a delay; each "
                   "variant's launches run in processes of their own (a trap ends one)",
        "clusters_per_launch": EXIT_CLUSTERS, "rows": rows}}


def _exit_row(measured: dict) -> dict:
    probe = measured["probe"]
    mode, delay_us, what = EXIT[probe]
    runs = measured["runs"]
    total = {k: sum(r.get(k) or 0 for r in runs)
             for k in ("clusters", "reached", "remote_returned", "returned",
                       "peer_exit_recorded", "after_peer_exit")}
    gaps = [r["gap_cycles"] for r in runs if r.get("gap_cycles")]
    endings = {k: sum(1 for r in runs if r["ending"] == k) for k in ("finished", "trapped",
                                                                      "hung")}
    errors = sorted({f"{r['error']['name']}: {r['error']['message']}" for r in runs
                     if r.get("error")})
    row = {"probe": probe, "program": what, "delay_us": delay_us, "launches": len(runs),
           "endings": endings, "errors": errors, **total,
           "gap_cycles": ({"min": min(g["min"] for g in gaps),
                           "max": max(g["max"] for g in gaps),
                           "medians": [g["median"] for g in gaps]} if gaps else None),
           "runs": runs}
    if mode == 0:
        row["peer_saw_arrive"] = sum(r.get("peer_saw_arrive") or 0 for r in runs)
    if mode == 2:
        row["own_half_landed"] = sum(r.get("own_half_landed") or 0 for r in runs)
        row["own_half_gave_up"] = sum(r.get("own_half_gave_up") or 0 for r in runs)
    row["silicon"] = _exit_seen(row, mode)
    row["outcome"] = _exit_outcome(row, mode)
    return row


def _exit_seen(row: dict, mode: int) -> list[str]:
    """What silicon showed, in the words of the model's `reachable`: `hung` for a launch that
    never finished; for the control, `done` when CTA 1 saw every arrive (`deadlock` when its
    wait gave up); for a launch that reached into the exited CTA and finished or trapped,
    `remote_after_exit` (the access went through silently, or its consequence was the trap)."""
    seen = set()
    e = row["endings"]
    if e["hung"]:
        seen.add("hung")
    if mode == 0:
        if e["finished"]:
            seen.add("done" if row.get("peer_saw_arrive") == row["clusters"] else "deadlock")
        return sorted(seen)
    if e["finished"] or e["trapped"]:
        seen.add("remote_after_exit")
    return sorted(seen)


def _exit_outcome(row: dict, mode: int) -> str:
    e = row["endings"]
    parts = [f"{row['launches']} launches of {EXIT_CLUSTERS} clusters: {e['finished']} "
             f"finished, {e['trapped']} trapped, {e['hung']} hung"]
    if row["errors"]:
        parts.append("errors: " + "; ".join(row["errors"]))
    if mode == 0:
        parts.append(f"CTA 1 saw the arrive in {row.get('peer_saw_arrive')} of "
                     f"{row['clusters']} clusters")
    else:
        parts.append(f"CTA 0 issued the remote {'copy' if mode == 2 else 'arrive'} in "
                     f"{row['reached']} of {row['clusters']} clusters ({row['after_peer_exit']} "
                     "after CTA 1's last instruction by the SMs' clocks); the instruction "
                     f"returned in {row['remote_returned']}"
                     + ("" if mode == 3 else ", and the thread got past the fence after it "
                                             f"in {row['returned']}"))
    if mode == 2:
        parts.append(f"its own half landed in {row.get('own_half_landed')}, its bounded wait "
                     f"gave up in {row.get('own_half_gave_up')}")
    return "; ".join(parts) + "."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.capture.probes", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("traces/probes.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model-only", action="store_true",
                        help="recompute the checker's `model` columns of --out (no GPU)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated sections to measure again ({', '.join(SECTIONS)});"
                             " the others keep --out's figures")
    parser.add_argument("--launches", type=int, default=EXIT_LAUNCHES,
                        help="launches of each remote_after_exit variant")
    args = parser.parse_args(argv)
    if args.child:
        kind, _, rest = args.child.partition(":")
        if kind == "nc":
            result = run_no_complete(rest)
        elif kind == "exit":
            probe, _, launches = rest.partition(":")
            result = run_exit(probe, int(launches))
        elif kind == "device":
            from app.capture.device import device_info

            result = device_info()
        else:
            result = run_scale() if args.child == "scale" else run_probe(args.child)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)
    previous = json.loads(args.out.read_text()) if args.out.exists() else None
    only = [s for s in args.only.split(",") if s] or list(SECTIONS)
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    if args.model_only:
        if previous is None:
            parser.error(f"{args.out} does not exist")
        doc = {**previous, **_scale_doc(None, previous)}
        doc.update(_no_complete_doc(None, previous))
        doc.update(_exit_doc(None, previous))
        doc["version"] = VERSION
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    doc = dict(previous or {})
    doc.update({"format": "mbarrier-inspector/tx-probes", "version": VERSION})
    if "probes" in only:
        doc["probes"] = [_child(mode) or {"probe": mode, "program": PROBES[mode],
                                          "error": "no result"} for mode in PROBES]
    if "scale" in only:
        doc.update(_scale_doc(_child("scale"), None))
    if "no_complete" in only:
        rows = [_child(f"nc:{probe}") or {"probe": probe, "program": NO_COMPLETE[probe][2],
                                          "error": {"name": "no_result", "message": ""}}
                for probe in NO_COMPLETE]
        doc.update(_no_complete_doc(rows, None))
    if "remote_after_exit" in only:
        doc.update(_exit_doc([_exit_runs(probe, args.launches) for probe in EXIT], None))
    doc["device"] = _device()
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


VERSION = 3
"""Version 3 adds `no_complete` and `remote_after_exit` to version 2's parts (unchanged)."""


def _device() -> dict:
    out = _child("device")
    return out or {}


def _exit_runs(probe: str, launches: int) -> dict:
    """A variant's launches, each process running until one fails: a trap ends a process, so
    the next launch starts a fresh one (at most `launches` processes)."""
    runs: list[dict] = []
    for _ in range(launches):
        if len(runs) >= launches:
            break
        result = _child(f"exit:{probe}:{launches - len(runs)}")
        if result is None:
            runs.append({"ending": "trapped", "error": {"name": "no_result",
                                                        "message": "the process died"},
                         "clusters": EXIT_CLUSTERS})
            continue
        runs.extend(result["runs"])
        if any(r["ending"] == "hung" for r in result["runs"]):
            break  # a launch that never finished: no more of this variant
    return {"probe": probe, "runs": runs[:launches]}


def _child(mode: str) -> dict | None:
    """One measurement in a process of its own (a trap ends its CUDA context, not ours)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "app.capture.probes", "--child", mode],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"probe {mode}: the process ran past 300 s\n")
        return None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.stderr.write(f"probe {mode}: no result (exit {proc.returncode}): "
                         f"{proc.stderr[-500:]}\n")
        return None
    sys.stderr.write(f"probe {mode}: {lines[-1]}\n")  # the measurement, whatever comes next
    return json.loads(lines[-1])


if __name__ == "__main__":
    sys.exit(main())
