"""Probes of the tx-count on a real Hopper GPU: what the hardware does where the model's answer
rests on SEMANTICS.md alone (bytes landing before their `expect_tx`, more bytes than announced).

One thread drives one mbarrier through one small program per probe, each launch in a process of
its own (a trap loses the context). Each probe reports whether the phase completed, after how many
cycles, and whether the launch trapped; `python -m app.capture.probes --out traces/probes.json` on
a GPU machine writes the file we ship, and tests/replay compares it with the barrier model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from app.capture import kernels as K

PRELUDE = K.SOURCE[:K.SOURCE.index("// " + "-" * 66 + " the event log")]
"""The typedefs and PTX helpers (mbarrier, bulk copies, clocks) the capture kernels use."""

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

SOURCE = PRELUDE + r"""
__device__ __forceinline__ void mbar_complete_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ u32 mbar_test_wait_parity(u32 bar, u32 parity) {
    u32 ok;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok;
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
    u32 done0 = bounded_wait(bar, 0, deadline, &tries);
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
"""


def run_probe(mode: str) -> dict:
    """One probe in this process (needs CuPy and a Hopper GPU)."""
    import cupy

    kernel = cupy.RawKernel(SOURCE, "tx_probe_kernel", options=K.COMPILE_OPTIONS)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.capture.probes", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("traces/probes.json"))
    parser.add_argument("--child", choices=list(PROBES))
    args = parser.parse_args(argv)
    if args.child:
        sys.stdout.write(json.dumps(run_probe(args.child)) + "\n")
        sys.stdout.flush()
        os._exit(0)
    results = []
    for mode in PROBES:
        proc = subprocess.run([sys.executable, "-m", "app.capture.probes", "--child", mode],
                              capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if lines else
                       {"probe": mode, "program": PROBES[mode],
                        "error": f"no result (exit {proc.returncode}): {proc.stderr[-300:]}"})
    from app.capture.runner import device_info

    doc = {"format": "mbarrier-inspector/tx-probes", "version": 1, "device": device_info(),
           "probes": results}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
