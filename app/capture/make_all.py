"""Regenerates every shipped GPU trace under traces/ (what `make capture` runs on a GPU machine).

Each entry of `CAPTURES` is one configuration run as its own child process (a trap takes only that
one down); its raw log is kept beside the trace under traces/raw/ when asked, decoded into a trace,
checked for conformance, given its lesson text and written as compact JSON. `--only` picks entries,
`--raw-dir` keeps the raw logs, `--decode-only` rebuilds the traces from kept raw logs on a machine
with no GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .runner import CaptureConfig, bandwidth, capture

log = logging.getLogger("mbarrier_inspector.capture")

TRACES = Path("traces")
"""Where the traces are written: `make capture` runs from the checkout's root."""
RAW = TRACES / "raw"

SM_COUNT = 132
"""One CTA per SM of an H200 for the runs that count how many CTAs fail."""

def config(**fields) -> dict:
    """One capture's CaptureConfig fields."""
    return fields


CAPTURES: dict[str, dict] = {
    "single_barrier": config(scenario="single_barrier", tiles=8),
    "single_barrier_forget_phase_toggle": config(
        scenario="single_barrier", tiles=8, bugs=["forget_phase_toggle"]),
    "double_buffer_tma_1stage": config(
        scenario="double_buffer_tma", stages=1, tiles=8, ctas=SM_COUNT),
    "double_buffer_tma_2stage": config(
        scenario="double_buffer_tma", stages=2, tiles=8, ctas=SM_COUNT),
    "double_buffer_tma_4stage": config(
        scenario="double_buffer_tma", stages=4, tiles=12, ctas=SM_COUNT),
    "double_buffer_tma_2consumers": config(
        scenario="double_buffer_tma", stages=2, tiles=8, consumers=2, ctas=SM_COUNT),
    "double_buffer_tma_forget_phase_toggle_deadlock": config(
        scenario="double_buffer_tma", stages=2, tiles=8, bugs=["forget_phase_toggle"],
        ctas=SM_COUNT),
    "double_buffer_tma_forget_phase_toggle_4stage": config(
        scenario="double_buffer_tma", stages=4, tiles=12, bugs=["forget_phase_toggle"],
        ctas=SM_COUNT),
    "double_buffer_tma_forget_phase_toggle_stale": config(
        scenario="double_buffer_tma", stages=1, tiles=12, bugs=["forget_phase_toggle"],
        ctas=SM_COUNT),
    "double_buffer_tma_forget_producer_phase_toggle": config(
        scenario="double_buffer_tma", stages=2, tiles=8, bugs=["forget_producer_phase_toggle"],
        ctas=SM_COUNT),
    "double_buffer_tma_forget_producer_phase_toggle_1stage": config(
        scenario="double_buffer_tma", stages=1, tiles=8, bugs=["forget_producer_phase_toggle"],
        ctas=SM_COUNT),
    "double_buffer_tma_producer_skips_empty_wait": config(
        scenario="double_buffer_tma", stages=1, tiles=8, bugs=["producer_skips_empty_wait"],
        ctas=SM_COUNT),
    "double_buffer_tma_consumer_skips_release": config(
        scenario="double_buffer_tma", stages=2, tiles=6, bugs=["consumer_skips_release"]),
    "double_buffer_tma_wrong_arrival_count": config(
        scenario="double_buffer_tma", stages=2, tiles=8, consumers=2,
        bugs=["wrong_arrival_count"], ctas=SM_COUNT),
    "double_buffer_tma_expect_tx_long": config(
        scenario="double_buffer_tma", stages=2, tiles=6, bugs=["expect_tx_long"]),
    "double_buffer_tma_expect_tx_short": config(
        scenario="double_buffer_tma", stages=2, tiles=6, bugs=["expect_tx_short"]),
    "proxy_fence_store": config(scenario="proxy_fence_store", stages=2, tiles=16, ctas=SM_COUNT),
    "proxy_fence_store_missing_proxy_fence": config(
        scenario="proxy_fence_store", stages=2, tiles=16, bugs=["missing_proxy_fence"],
        ctas=SM_COUNT),
}
"""Shipped trace name -> capture configuration (CaptureConfig fields)."""


def build_trace(name: str, raw: dict) -> dict:
    """Decode a raw log, check it against the barrier model and write its lesson text."""
    from app.capture.decode import decode
    from app.capture.lessons import lesson
    from app.replay.conformance import check_trace

    doc = decode(raw)
    report = check_trace(doc)
    doc["source"]["conformance"] = report.summary()
    doc["source"]["lesson"] = lesson(name, doc)
    return doc


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.capture.make_all",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated capture names")
    parser.add_argument("--out-dir", default=str(TRACES))
    parser.add_argument("--raw-dir", default=str(RAW), help="where raw logs are kept and read")
    parser.add_argument("--decode-only", action="store_true",
                        help="rebuild traces from the raw logs in --raw-dir (no GPU)")
    parser.add_argument("--no-bandwidth", action="store_true")
    parser.add_argument("--bandwidth-only", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = [n for n in args.only.split(",") if n] or list(CAPTURES)
    unknown = [n for n in names if n not in CAPTURES]
    if unknown:
        parser.error(f"unknown capture(s): {', '.join(unknown)}")
    out_dir = Path(args.out_dir)
    raw_dir = Path(args.raw_dir) if args.raw_dir else None
    failures = 0
    for name in [] if args.bandwidth_only else names:
        raw_path = raw_dir / f"{name}.raw.json" if raw_dir else None
        if args.decode_only:
            if raw_path is None or not raw_path.exists():
                log.info("%s: no raw log at %s", name, raw_path)
                failures += 1
                continue
            raw = json.loads(raw_path.read_text())
        else:
            cfg = CaptureConfig(**CAPTURES[name])
            raw = capture(cfg)
            if raw_path is not None:
                write_json(raw_path, raw)
        error = raw.get("error")
        log.info("%s: %d records, %s ms, error=%s", name, len(raw.get("records", [])),
                 raw.get("elapsed_ms"), error and error.get("name"))
        try:
            doc = build_trace(name, raw)
        except Exception:  # keep going: the other captures and the raw logs still matter
            log.exception("%s: decoding failed", name)
            failures += 1
            continue
        write_json(out_dir / f"{name}.json", doc)
        figures = doc["source"]["figures"]
        log.info("%s: %s, %d steps, %s", name, doc["status"], doc["total_steps"], figures)
    if not (args.no_bandwidth or args.decode_only):
        doc = bandwidth()
        write_json(out_dir / "bandwidth.json", doc)
        best = doc.get("best") or {}
        log.info("bandwidth: memcpy %s GB/s, best %s GB/s (%s stages x %s B, lag %s), %.1f%%",
                 doc["memcpy"]["gbps"], best.get("gbps"), best.get("stages"),
                 best.get("tile_bytes"), best.get("release_lag"),
                 100 * (doc.get("best_fraction_of_memcpy") or 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
