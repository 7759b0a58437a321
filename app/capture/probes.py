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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.capture.probes", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("traces/probes.json"))
    parser.add_argument("--child", choices=[*PROBES, "scale"])
    parser.add_argument("--model-only", action="store_true",
                        help="recompute the checker's `model` columns of --out (no GPU)")
    args = parser.parse_args(argv)
    if args.child:
        result = run_scale() if args.child == "scale" else run_probe(args.child)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)
    previous = json.loads(args.out.read_text()) if args.out.exists() else None
    if args.model_only:
        if previous is None:
            parser.error(f"{args.out} does not exist")
        doc = {**previous, **_scale_doc(None, previous)}
    else:
        results = [_child(mode) or {"probe": mode, "program": PROBES[mode],
                                    "error": "no result"} for mode in PROBES]
        from app.capture.device import device_info

        doc = {"format": "mbarrier-inspector/tx-probes", "version": 2, "device": device_info(),
               "probes": results, **_scale_doc(_child("scale"), None)}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def _child(mode: str) -> dict | None:
    proc = subprocess.run([sys.executable, "-m", "app.capture.probes", "--child", mode],
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.stderr.write(f"probe {mode}: no result (exit {proc.returncode}): "
                         f"{proc.stderr[-500:]}\n")
        return None
    return json.loads(lines[-1])


if __name__ == "__main__":
    sys.exit(main())
