"""Turns the generated kernels' raw GPU logs into the replays the server ships (no GPU needed).

    python -m app.capture.ship                      # traces/raw/gen_*.raw.json -> traces/<id>.json
    python -m app.capture.ship --only single_barrier --raw-dir /tmp/raw --out-dir /tmp/traces

Each replay is the engine driven in the GPU's order (`app.replay.gpu_order`), as a trace document
whose `source` also carries the figures of the whole launch (`source.ctas`), the pipeline text
(`source.pipeline`, so a page can simulate pipelines that are not built-ins), a title and the
lesson (`app.capture.lessons`). The id is the capture's name without `gen_`. The same raw log
always gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from app.replay.gpu_order import document, replay

from .lessons import lesson, title

log = logging.getLogger("mbarrier_inspector.capture")

TRACES = Path("traces")
"""Where the replays are written: `make capture` runs from the checkout's root."""
RAW = TRACES / "raw"
PREFIX = "gen_"

SKIPPED = {
    "single_barrier_forget_phase_toggle_write_through":
        "the same pipeline as single_barrier_forget_phase_toggle with every record written "
        "through to the host: it shows the logging changing a race, not the pipeline "
        "(docs/gpu-capture.md keeps its figures)",
    "remote_after_exit":
        "a remote arrive into a CTA that has exited, which the H200 never completes: the "
        "kernel hangs and the runner keeps CTA 0's log; the replay can only call that a trap "
        "today (docs/gpu-capture.md keeps its figures)",
    "bulk_reduce":
        "a bulk reduction (cp.reduce.async.bulk .add.f32) of t[0] into out[0], then an "
        "ld.global of out[0]'s first word, the kernel's only observation: t[0]'s word 0 is 0 "
        "(+0.0f), so adding it leaves that word as it was (tile 1's word 0, 0x10000, read in "
        "CTA 0), and the read cannot tell whether the reduction landed; the engine tracks "
        "which tile an element holds, not values, so the replay has nothing to compare (0 "
        "observations), and would say nothing the simulation does not (docs/gpu-capture.md)",
    "bulk_reduce_read_only":
        "as bulk_reduce: its one read (after wait_group.read only) found 0x10000 too, which "
        "the reduction leaves unchanged either way (docs/gpu-capture.md)",
    "bulk_reduce_no_fence":
        "as bulk_reduce: its one read found 0x10000, which the reduction leaves unchanged "
        "either way (docs/gpu-capture.md)",
    "remote_after_exit_exit_sync":
        "the same kernel with a cluster barrier before exit that the program does not have: "
        "it shows what that barrier hides, not the pipeline (docs/gpu-capture.md)",
}
"""Captures kept as raw logs for debugging the capture but not served, with why."""

DIFFERENCES: dict[str, str] = {
    "mirage_705_box_bytes_unclamped_box":
        "On the H200 the 1,024 surplus bytes of k-tile 1 landed before k-tile 2's "
        "announcement, so full_barrier[0]'s count went past zero and the MMA warp's last wait "
        "timed out, the hang of the report; the GPU does not log a copy's landings, and the "
        "replay, which lands them only when a wait needs them, lands them after that "
        "announcement, where they complete the phase and the wait returns. Both orders are "
        "schedules of the model: the round-robin run of this lesson ends in the GPU's "
        "deadlock, and so do schedules the checker finds.",
    "red_async":
        "The engine tracks which tile's words a stage holds, not their values: red.async.add "
        "adds 1 to the counter's first word, so the kernel's check of the read finds that word "
        "one more than the tile wrote, which it counts as a wrong word; the GPU's value is the "
        "reduction's result, landed before the read as the engine's run has it (on the H200 "
        "all 66 clusters' reads found exactly that one word changed).",
    "red_async_no_wait":
        "As in red_async, the read found the counter's first word one more than the tile "
        "wrote: the reduction had landed before the unordered read in all 66 clusters, and the "
        "engine, which tracks tiles rather than values, calls the read right; the race the "
        "toggle opens was won on this run, and the checker finds the schedule that loses it.",
    "wgmma_ring_no_fence":
        "PTX 9.7.15.7.1 leaves a warpgroup's first wgmma.mma_async without a wgmma.fence "
        "undefined, and the engine stops there; the H200 ran on (132 CTAs, every warp "
        "finished, no read wrong), which undefined behaviour allows: the fence orders the "
        "accumulator registers' accesses, and this kernel checks no accumulator value.",
}
"""Replay id -> the one sentence that explains a hardware/model difference. A replay whose
conformance does not match ships only with its sentence here (it goes into the lesson)."""

SUMMARY_FIELDS = ("lines", "reads_wrong", "status", "reported")
"""A CTA's words per agent in the raw log's `summary` (app/capture/agent_code.py writes them)."""
ENDS = {0: "finished", 1: "timed_out", 2: "operand_error"}


class ShipError(ValueError):
    """A raw log that cannot become a served replay; the message says why."""


def replay_id(raw: dict) -> str:
    return str(raw.get("name") or "").removeprefix(PREFIX)


def launch_figures(raw: dict) -> dict:
    """What every CTA of the launch reported (the raw log's `summary` and `dst`): per agent and
    in all, how each ended, the lines run and the reads that found wrong words."""
    summary = raw.get("summary") or []
    agents = raw.get("agents") or []
    per_agent = []
    for a, name in enumerate(agents):
        words = [cta[a] for cta in summary if a < len(cta)]
        ended = {end: sum(1 for w in words if w[3] and w[2] == code)
                 for code, end in ENDS.items()}
        per_agent.append({"name": name, "lines": sum(w[0] for w in words),
                          "reads_wrong": sum(w[1] for w in words), **ended,
                          "not_reported": sum(1 for w in words if not w[3])})
    outcomes = {"finished": 0, "timed_out": 0, "operand_error": 0, "not_reported": 0}
    wrong_ctas = 0
    for cta in summary:
        if not all(w[3] for w in cta):
            outcomes["not_reported"] += 1
        elif any(w[2] == 2 for w in cta):
            outcomes["operand_error"] += 1
        elif any(w[2] == 1 for w in cta):
            outcomes["timed_out"] += 1
        else:
            outcomes["finished"] += 1
        wrong_ctas += any(w[1] for w in cta)
    stored = {name: {"changed": d.get("changed_all_ctas"), "elements": d.get("elements_all_ctas")}
              for name, d in sorted((raw.get("dst") or {}).items())}
    return {
        "launched": (raw.get("launch") or {}).get("grid", len(summary)),
        "reported": len(summary),
        "words": list(SUMMARY_FIELDS),
        "outcomes": outcomes,
        "reads_wrong": sum(a["reads_wrong"] for a in per_agent),
        "ctas_with_wrong_reads": wrong_ctas,
        "lines": sum(a["lines"] for a in per_agent),
        "agents": per_agent,
        "stored": stored,
        "trapped": bool(raw.get("error")),
    }


def build(raw: dict, strict: bool = True) -> dict:
    """The served replay of one raw log (format v2): the GPU-order document plus `source.ctas`,
    `source.pipeline`, `source.title` and `source.lesson`. `strict` refuses a replay that does
    not match unless DIFFERENCES explains it (what ships); a one-off capture passes False."""
    if raw.get("format") != "mbarrier-inspector/raw-gpu-log" or raw.get("version") != 2:
        raise ShipError(f"{raw.get('name')!r}: not a generated kernel's raw log (format v2)")
    rid = replay_id(raw)
    state = replay(raw, int(raw.get("replay_cta", 0)))
    doc = document(state)
    source = doc["source"]
    pipeline = raw.get("pipeline") or {}
    source["id"] = rid
    source["pipeline"] = pipeline.get("source")
    source["ctas"] = launch_figures(raw)
    source["title"] = title(doc)
    conformance = source["conformance"]
    difference = DIFFERENCES.get(rid)
    if strict and not conformance["matches"] and not difference:
        why = conformance["first_divergence"]
        raise ShipError(f"{rid}: the engine diverges at step {why['step']} ({why['why']}); "
                        "ship it only with a sentence in DIFFERENCES that explains why")
    source["lesson"] = lesson(doc, difference)
    return doc


def encode(doc: dict) -> str:
    return json.dumps(doc, separators=(",", ":")) + "\n"


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(encode(doc))


def raw_logs(raw_dir: Path) -> list[Path]:
    """The generated kernels' raw logs that ship, by name."""
    out = []
    for path in sorted(raw_dir.glob(f"{PREFIX}*.raw.json")):
        rid = path.name[len(PREFIX):-len(".raw.json")]
        if rid not in SKIPPED:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.capture.ship",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated replay ids")
    parser.add_argument("--raw-dir", default=str(RAW))
    parser.add_argument("--out-dir", default=str(TRACES))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    only = {n for n in args.only.split(",") if n}
    failures = 0
    for path in raw_logs(Path(args.raw_dir)):
        raw = json.loads(path.read_text())
        rid = replay_id(raw)
        if only and rid not in only:
            continue
        try:
            doc = build(raw)
        except ShipError as exc:
            log.error("%s", exc)
            failures += 1
            continue
        out = Path(args.out_dir) / f"{rid}.json"
        write_json(out, doc)
        c = doc["source"]["conformance"]
        log.info("%s: %s on the GPU, %d steps, %d bytes, matches=%s", rid, c["status"]["gpu"],
                 doc["total_steps"], out.stat().st_size, c["matches"])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
