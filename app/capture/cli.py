"""`mbarrier-inspector capture`: compile a pipeline (a built-in id or a .pipe file) into a logging
CUDA kernel, run it on a Hopper GPU, replay its log through the engine in the GPU's order and
write the replay; or measure the TMA ring's bandwidth.

    mbarrier-inspector capture double_buffer_tma --stages 2 --tiles 8 --bugs forget_phase_toggle \
        --out /tmp/mine.json
    mbarrier-inspector capture my_ring.pipe --param stages=3 --bugs expect_tx_short \
        --raw /tmp/my_ring.raw.json --out /tmp/my_ring.json
    mbarrier-inspector capture bandwidth --out traces/bandwidth.json

`app/cli.py` wires this in with `add_parser(subparsers)`; `run(args)` returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `capture` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "capture", help="run a pipeline on an NVIDIA Hopper GPU (CuPy) and write its replay",
        description="Generate a pipeline's logging kernel, run it on a Hopper GPU, replay its "
                    "log through the engine in the GPU's order (source.kind = gpu, with "
                    "conformance) and write it; or measure the TMA ring's bandwidth beside "
                    "cudaMemcpy and the hand-written reference.")
    p.add_argument("scenario", help="a built-in id, a .pipe file, or bandwidth")
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--tiles", type=int, default=None)
    p.add_argument("--tile-bytes", type=int, default=None)
    p.add_argument("--chunk-bytes", type=int, default=None)
    p.add_argument("--consumers", type=int, default=None)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="any pipeline parameter")
    p.add_argument("--bugs", default="", help="comma-separated bug toggles")
    p.add_argument("--ctas", type=int, default=None,
                   help="CTAs launched: a multiple of the cluster size, which is the default "
                        "(the first CTA, or cluster, logs)")
    p.add_argument("--timeout-us", type=float, default=2000.0,
                   help="deadline of every bounded wait loop")
    p.add_argument("--raw", default="", help="also write the raw log here (and the .cu beside)")
    p.add_argument("--out", required=True, help="where to write the replay (or bandwidth) JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Capture and write; prints a one-line summary."""
    from .ship import write_json

    if args.scenario != "bandwidth":
        return run_generated(args)
    from .bandwidth import bandwidth

    out = Path(args.out)
    doc = bandwidth()
    write_json(out, doc)
    best = doc.get("best") or {}
    gen = (doc.get("generated") or {}).get("best") or {}
    sys.stdout.write(f"memcpy {doc['memcpy']['gbps']} GB/s; best ring {best.get('gbps')} GB/s "
                     f"({best.get('stages')} stages x {best.get('tile_bytes')} B), generated "
                     f"{gen.get('gbps')} GB/s; wrote {out}\n")
    return 0


def run_generated(args: argparse.Namespace) -> int:
    """Generate the pipeline's kernel, capture it, replay it in the GPU's order, write the trace
    (and, with --raw, the raw log and the kernel's .cu beside it)."""
    from app.lang.errors import ParamError, PipelineError

    from .codegen import CodegenError
    from .gen_runner import GenCapture, capture, plan
    from .ship import build, write_json

    path = Path(args.scenario)
    pipeline = path.read_text() if path.suffix == ".pipe" else args.scenario
    params = {k: v for k, v in (("stages", args.stages), ("tiles", args.tiles),
                                ("tile_bytes", args.tile_bytes),
                                ("chunk_bytes", args.chunk_bytes),
                                ("consumers", args.consumers)) if v is not None}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            sys.stderr.write(f"capture: --param {item!r}: expected NAME=INTEGER\n")
            return 2
        params[key] = int(value)
    out = Path(args.out)
    cap = GenCapture(out.stem, pipeline, params, [b for b in args.bugs.split(",") if b],
                     ctas=args.ctas or 1, timeout_us=args.timeout_us, flush_before_arrive=True)
    try:
        planned = plan(cap)
    except KeyError:
        sys.stderr.write(f"capture: {args.scenario!r} is neither a built-in scenario nor a "
                         ".pipe file\n")
        return 2
    except (CodegenError, ParamError, PipelineError) as exc:
        sys.stderr.write(f"capture: {exc}\n")
        return 2
    cuda, cluster = planned.cuda, planned.layout.cluster
    if args.ctas is None:
        cap.ctas = cluster
    elif args.ctas < 1 or args.ctas % cluster:
        sys.stderr.write(f"capture: --ctas {args.ctas}: the pipeline runs as clusters of "
                         f"{cluster} CTAs; give a positive multiple of {cluster}\n")
        return 2
    raw = capture(cap)
    if args.raw:
        raw_path = Path(args.raw)
        write_json(raw_path, raw)
        raw_path.with_name(f"{out.stem}.cu").write_text(cuda)
    error = raw.get("error")
    if error and not raw.get("records"):
        sys.stderr.write(f"capture: nothing was logged: {error.get('name')}: "
                         f"{error.get('message')}\n")
        return 1
    doc = build(raw, strict=False)
    write_json(out, doc)
    report = doc["source"]["conformance"]
    verdict = "matches" if report["matches"] else \
        f"DIVERGES at step {report['first_divergence']['step']}: " \
        f"{report['first_divergence']['why']}"
    sys.stdout.write(f"{report['status']['gpu']} on the GPU, {doc['status']} in the engine: "
                     f"{doc['total_steps']} steps, {len(doc['diagnostics'])} diagnostics; "
                     f"replayed in the GPU's order, the engine {verdict}; wrote {out}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m app.capture.cli ...`) until app/cli.py wires it in."""
    parser = argparse.ArgumentParser(prog="mbarrier-inspector")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
