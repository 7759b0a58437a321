"""Why pipelining: GB/s of the TMA ring over stages x tile sizes, beside cudaMemcpy, measured twice
in one run: with the hand-written reference kernel below (the one kernel `app/capture` keeps by
hand), and with the kernel generated from `pipelines/bandwidth_ring.pipe` with its log compiled
out. The two agreeing is the evidence that a generated kernel runs a pipeline at full speed.

    python -m app.capture.bandwidth --out traces/bandwidth.json     # on a GPU machine

The sweep runs in a child process (`bandwidth()`), so the caller never imports CuPy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .codegen import COMPILE_OPTIONS, generate, layout, prelude

PIPELINE = Path(__file__).with_name("pipelines") / "bandwidth_ring.pipe"
SMEM_HEADER = 128
"""Bytes at the start of the reference kernel's shared memory that hold its mbarriers."""
DEADLINE_CYCLES = 200_000_000

REFERENCE = prelude(logging=False) + r"""
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
            if (!bounded_wait_parity(smem_u32(&bars[8 + s]), ((i / stages) & 1) ^ 1, deadline,
                                     &tries)) {
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
        if (!bounded_wait_parity(smem_u32(&bars[s]), (i / stages) & 1, deadline, &tries)) {
            atomicAdd(errors, 1u);
            return;
        }
        bulk_store(dst + t * tile_bytes, smem_u32(bufs + s * tile_bytes), tile_bytes);
        bulk_commit();
        if (i >= lag) {
            if (lag == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            else asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            u32 r = (i - lag) % stages;
            mbar_arrive(smem_u32(&bars[8 + r]), 1);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"""
"""The hand-written reference (lag 0 or 1)."""



def generated_program(stages: int, tiles: int, tile_bytes: int):
    from app.scenarios import from_source

    cfg = from_source(PIPELINE.read_text()).resolve(
        {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes}, [])
    return cfg.program


def run_bandwidth(total_bytes: int = 4 << 30, stages: list[int] | None = None,
                  tile_kib: list[int] | None = None, repeats: int = 5) -> dict:
    """Both sweeps in this process (needs CuPy and a Hopper GPU).

    GB/s counts bytes read plus bytes written per second, as the D2D copy does. Each
    configuration is checked once (destination equals source) and timed `repeats` times; the
    median is kept. The generated kernel gives each CTA its own `tiles` (one CTA per SM moves
    total_bytes / SMs), the reference hands tiles out grid-stride: the same bytes either way.
    """
    import cupy
    import numpy as np

    from .device import device_info, now

    stages = stages or list(range(1, 9))
    tile_kib = tile_kib or [4, 16, 32]
    rt = cupy.cuda.runtime
    info = device_info()
    sms = info["sm_count"]
    optin = rt.deviceGetAttribute(97, 0)  # cudaDevAttrMaxSharedMemoryPerBlockOptin
    reference = cupy.RawKernel(REFERENCE, "tma_ring_bandwidth_kernel", options=COMPILE_OPTIONS)
    src = cupy.arange(total_bytes // 4, dtype=cupy.uint32)
    dst = cupy.empty_like(src)
    errors = cupy.zeros(1, dtype=cupy.uint32)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def timed(launch) -> float:
        samples = []
        for _ in range(repeats):
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            samples.append(cupy.cuda.get_elapsed_time(start, stop))
        return float(np.median(samples))

    def gbps(nbytes: int, ms: float) -> float:
        return round(nbytes / (ms * 1e-3) / 1e9, 1)

    def memcpy():
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, total_bytes, rt.memcpyDeviceToDevice, 0)

    memcpy()
    memcpy_ms = timed(memcpy)
    results, generated = [], []
    for kib in tile_kib:
        tile = kib * 1024
        n_tiles = total_bytes // tile
        for s in stages:
            smem = SMEM_HEADER + s * tile
            for lag in sorted({0, min(1, s - 1)}):
                row = {"tile_bytes": tile, "stages": s, "release_lag": lag, "smem_bytes": smem}
                if smem > optin:
                    row.update(fits=False, gbps=None, ms=None, correct=None)
                    results.append(row)
                    continue
                reference.max_dynamic_shared_size_bytes = smem
                args = (src, dst, np.uint64(n_tiles), np.uint32(tile), np.uint32(s),
                        np.uint32(lag), np.uint64(DEADLINE_CYCLES), errors)

                def launch(args=args, smem=smem):
                    reference((sms,), (64,), args, shared_mem=smem)

                dst.fill(0)
                errors.fill(0)
                launch()
                cupy.cuda.Device(0).synchronize()
                correct = bool((dst == src).all()) and int(errors.get()[0]) == 0
                ms = timed(launch)
                row.update(fits=True, ms=round(ms, 4), gbps=gbps(2 * total_bytes, ms),
                           correct=correct)
                results.append(row)
                sys.stderr.write(f"reference {kib:2d} KiB x {s} stages lag {lag}: "
                                 f"{row['gbps']} GB/s correct={correct}\n")
            generated.append(_generated(cupy, np, s, tile, total_bytes, sms, optin, timed, gbps))
    memcpy_gbps = gbps(2 * total_bytes, memcpy_ms)
    best = _best(results)
    best_generated = _best(generated)
    return {
        "format": "mbarrier-inspector/bandwidth",
        "version": 1,
        "source": {"kind": "gpu", **info, "captured_at": now()},
        "method": ("One CTA per SM, a producer warp loading tiles with cp.async.bulk into a ring "
                   "of `stages` SMEM buffers (full_barrier / empty_barrier per stage) and a "
                   "consumer warp storing each tile back with a bulk store; `release_lag` is how "
                   "many bulk stores stay in flight before consumer_release (0: wait_group.read 0 "
                   "before every release). GB/s counts bytes read plus bytes written; median of "
                   f"{repeats} runs after a checked warm-up run. `results`: the hand-written "
                   "reference kernel; `generated`: the kernel generated from "
                   "app/capture/pipelines/bandwidth_ring.pipe with its log compiled out "
                   "(release lag 0), in the same run."),
        "bytes_read": total_bytes,
        "bytes_written": total_bytes,
        "memcpy": {"ms": round(memcpy_ms, 4), "gbps": memcpy_gbps},
        "results": results,
        "best": best,
        "best_fraction_of_memcpy": round(best["gbps"] / memcpy_gbps, 3) if best else None,
        "generated": {"pipeline": "app/capture/pipelines/bandwidth_ring.pipe",
                      "results": generated, "best": best_generated,
                      "best_fraction_of_reference": (
                          round(best_generated["gbps"] / best["gbps"], 3)
                          if best and best_generated else None)},
    }


def _best(rows: list[dict]) -> dict | None:
    ok = [r for r in rows if r.get("gbps") and r.get("correct")]
    return max(ok, key=lambda r: r["gbps"]) if ok else None


def _generated(cupy, np, stages: int, tile: int, total_bytes: int, sms: int, optin: int, timed,
               gbps) -> dict:
    """One configuration of the generated ring: each CTA moves its own `tiles` tiles."""
    tiles = max(1, total_bytes // tile // sms)
    program = generated_program(stages, tiles, tile)
    lay = layout(program, logging=False)
    row = {"tile_bytes": tile, "stages": stages, "release_lag": 0, "tiles_per_cta": tiles,
           "smem_bytes": lay.smem_bytes}
    if lay.smem_bytes > optin:
        row.update(fits=False, gbps=None, ms=None, correct=None)
        return row
    fn = cupy.RawKernel(generate(program, "bandwidth_ring", logging=False), "pipeline_kernel",
                        options=COMPILE_OPTIONS)
    fn.max_dynamic_shared_size_bytes = lay.smem_bytes
    words = lay.gmem_cta_bytes // 4
    gmem = cupy.zeros((sms, words), dtype=cupy.uint32)
    moved = sms * tiles * tile
    source_words = tiles * tile // 4
    gmem[:, :source_words] = cupy.arange(sms * source_words, dtype=cupy.uint32).reshape(
        sms, source_words)
    summary = cupy.zeros(sms * len(program.agents) * 4, dtype=cupy.uint32)
    out_first = lay.tensor_offsets[1] // 4
    args = (gmem, np.uint64(0), np.uint64(summary.data.ptr), np.uint32(0), np.uint32(1),
            np.uint64(DEADLINE_CYCLES), np.uint32(1), np.uint32(0))

    def launch():
        fn((sms,), (lay.threads,), args, shared_mem=lay.smem_bytes)

    launch()
    cupy.cuda.Device(0).synchronize()
    statuses = summary.reshape(sms, len(program.agents), 4)[:, :, 2]
    correct = bool((gmem[:, out_first:out_first + source_words] == gmem[:, :source_words]).all()
                   and int((statuses != 0).sum()) == 0)
    ms = timed(launch)
    row.update(fits=True, ms=round(ms, 4), gbps=gbps(2 * moved, ms), correct=correct)
    sys.stderr.write(f"generated {tile // 1024:2d} KiB x {stages} stages: {row['gbps']} GB/s "
                     f"correct={correct}\n")
    del gmem
    return row


def bandwidth(timeout_s: float = 600.0, python: str | None = None, **kwargs) -> dict:
    """Run the sweep in a child process; returns the bandwidth document."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bandwidth.json"
        cmd = [python or sys.executable, "-m", "app.capture.bandwidth", "--kwargs",
               json.dumps(kwargs), "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
        if not out.exists():
            raise RuntimeError(f"bandwidth run failed (exit {proc.returncode}): "
                               f"{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.capture.bandwidth",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where the bandwidth document goes")
    parser.add_argument("--kwargs", default="{}", help="run_bandwidth's arguments as JSON")
    args = parser.parse_args(argv)
    doc = run_bandwidth(**json.loads(args.kwargs))
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    gen = doc["generated"]
    best = doc["best"] and doc["best"]["gbps"]
    sys.stdout.write(f"reference best {best} GB/s, generated best "
                     f"{gen['best'] and gen['best']['gbps']} GB/s "
                     f"({gen['best_fraction_of_reference']} of the reference), "
                     f"memcpy {doc['memcpy']['gbps']} GB/s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
