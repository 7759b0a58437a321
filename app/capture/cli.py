"""`mbarrier-inspector capture`: run a scenario on the GPU and write its trace, or measure
bandwidth.

    mbarrier-inspector capture double_buffer_tma --stages 2 --tiles 8 --bugs forget_phase_toggle \
        --out traces/mine.json
    mbarrier-inspector capture bandwidth --out traces/bandwidth.json

`app/cli.py` wires this in with `add_parser(subparsers)`; `run(args)` returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .runner import SCENARIOS, CaptureConfig, CaptureError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `capture` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "capture", help="run a scenario on an NVIDIA Hopper GPU (CuPy) and write its trace",
        description="Run a scenario's kernel on a Hopper GPU, decode its event log into a trace "
                    "(source.kind = gpu), check it against the barrier model and write it; or "
                    "measure the TMA ring's bandwidth beside cudaMemcpy.")
    p.add_argument("scenario", choices=[*SCENARIOS, "bandwidth"])
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--tiles", type=int, default=8)
    p.add_argument("--tile-bytes", type=int, default=4096)
    p.add_argument("--chunk-bytes", type=int, default=1024)
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--bugs", default="", help="comma-separated bug toggles")
    p.add_argument("--ctas", type=int, default=1, help="CTAs launched (the first one is traced)")
    p.add_argument("--timeout-us", type=float, default=2000.0,
                   help="deadline of every bounded wait loop")
    p.add_argument("--raw", default="", help="also write the raw event log here")
    p.add_argument("--out", required=True, help="where to write the trace (or bandwidth) JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Capture, decode, check conformance, write; prints a one-line summary."""
    from .make_all import build_trace, write_json
    from .runner import bandwidth, capture

    out = Path(args.out)
    if args.scenario == "bandwidth":
        doc = bandwidth()
        write_json(out, doc)
        best = doc.get("best") or {}
        sys.stdout.write(f"memcpy {doc['memcpy']['gbps']} GB/s; best ring {best.get('gbps')} "
                         f"GB/s ({best.get('stages')} stages x {best.get('tile_bytes')} B); "
                         f"wrote {out}\n")
        return 0
    cfg = CaptureConfig(
        scenario=args.scenario, stages=args.stages, tiles=args.tiles,
        tile_bytes=args.tile_bytes, chunk_bytes=args.chunk_bytes, consumers=args.consumers,
        bugs=[b for b in args.bugs.split(",") if b], ctas=args.ctas, timeout_us=args.timeout_us)
    try:
        cfg.validate()
    except CaptureError as exc:
        sys.stderr.write(f"capture: {exc}\n")
        return 2
    raw = capture(cfg)
    if args.raw:
        Path(args.raw).write_text(json.dumps(raw))
    error = raw.get("error")
    if error and not raw.get("records"):
        sys.stderr.write(f"capture: nothing was logged: {error.get('name')}: "
                         f"{error.get('message')}\n")
        return 1
    doc = build_trace(out.stem, raw)
    write_json(out, doc)
    conformance = doc["source"]["conformance"]
    sys.stdout.write(f"{doc['status']}: {doc['total_steps']} steps, "
                     f"{len(doc['diagnostics'])} diagnostics, conformance "
                     f"{'passes' if conformance['passes'] else 'FAILS'}; wrote {out}\n")
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
