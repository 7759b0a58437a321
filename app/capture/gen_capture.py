"""Captures generated kernels on a GPU: each entry of `CAPTURES` is one pipeline, parameters, bug
toggles and launch, run in its own child process (a trap takes only that one down).

    python -m app.capture.gen_capture --out traces/raw            # every entry (needs a GPU)
    python -m app.capture.gen_capture --only gen_single_barrier --out /tmp/x
    python -m app.capture.gen_capture --sources-only --out /tmp/x  # the .cu files, no GPU
    python -m app.capture.gen_capture --pipeline my_ring.pipe --param stages=3 --bugs b --out x

For each entry NAME it writes NAME.raw.json (the raw log, format v2) and NAME.cu (the kernel that
ran) into the output folder; `app.replay.gpu_order` replays a raw log in the GPU's order.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .gen_runner import GenCapture, capture, plan

log = logging.getLogger("mbarrier_inspector.capture")

SM_COUNT = 132
PIPELINES = Path(__file__).with_name("pipelines")


def _pipe(name: str) -> str:
    return (PIPELINES / f"{name}.pipe").read_text()


def _entries() -> list[GenCapture]:
    # Kernels that may arrive twice in one phase trap, and a trap takes every CTA with it: those
    # run one CTA (the one that logs is the one that trapped) and copy their staged records out
    # before every arrive, so the trap loses only the trapping arrive's record.
    may_trap = {"flush_before_arrive": True}
    out = [
        GenCapture("gen_single_barrier", "single_barrier", {"tiles": 8}),
        GenCapture("gen_single_barrier_forget_phase_toggle", "single_barrier", {"tiles": 8},
                   ["forget_phase_toggle"], **may_trap),
        GenCapture("gen_single_barrier_forget_phase_toggle_write_through", "single_barrier",
                   {"tiles": 8}, ["forget_phase_toggle"], flush_every=1),
        GenCapture("gen_single_barrier_expect_tx_short", "single_barrier", {"tiles": 4},
                   ["expect_tx_short"], **may_trap),
        GenCapture("gen_single_barrier_expect_tx_long", "single_barrier", {"tiles": 4},
                   ["expect_tx_long"]),
    ]
    ring = {"stages": 2, "tiles": 8}
    for consumers in (1, 2):
        out.append(GenCapture(f"gen_double_buffer_tma_2stage_{consumers}consumer",
                              "double_buffer_tma", {**ring, "consumers": consumers},
                              ctas=SM_COUNT))
    traps = {"forget_producer_phase_toggle", "producer_skips_empty_wait"}
    for bug in ("forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
                "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
                "wrong_arrival_count"):
        consumers = 2 if bug == "wrong_arrival_count" else 1
        launch = {"ctas": 1, **may_trap} if bug in traps else {"ctas": SM_COUNT}
        if bug == "wrong_arrival_count":  # a second arrive in one phase may trap any CTA
            launch = {"ctas": SM_COUNT, "flush_every": 1}
        out.append(GenCapture(f"gen_double_buffer_tma_{bug}", "double_buffer_tma",
                              {**ring, "consumers": consumers}, [bug], **launch))
    for bug in sorted(traps):  # with one stage the second arrive comes within microseconds
        out.append(GenCapture(f"gen_double_buffer_tma_1stage_{bug}", "double_buffer_tma",
                              {"stages": 1, "tiles": 8}, [bug], ctas=1, **may_trap))
    out.append(GenCapture("gen_double_buffer_tma_1stage_forget_phase_toggle",
                          "double_buffer_tma", {"stages": 1, "tiles": 8}, ["forget_phase_toggle"],
                          ctas=SM_COUNT))
    out.append(GenCapture("gen_proxy_fence_store", "proxy_fence_store",
                          {"stages": 2, "tiles": 16}, ctas=SM_COUNT))
    out.append(GenCapture("gen_proxy_fence_store_missing_proxy_fence", "proxy_fence_store",
                          {"stages": 2, "tiles": 16}, ["missing_proxy_fence"], ctas=SM_COUNT))
    out.append(GenCapture("gen_release_behind", _pipe("release_behind"), {"tiles": 8},
                          ctas=SM_COUNT))
    out.append(GenCapture("gen_copy_per_chunk", _pipe("copy_per_chunk"), {"tiles": 8},
                          ctas=SM_COUNT))
    out.append(GenCapture("gen_copy_per_chunk_expect_tx_short", _pipe("copy_per_chunk"),
                          {"tiles": 8}, ["expect_tx_short"], ctas=SM_COUNT))
    # With records copied out before every arrive, these did not trap on the H200 (1 CTA, or
    # 132 CTAs all logging); with 132 CTAs of which CTA 0 logs each record at once, they do:
    # CTA 0's log is then the consistent prefix of a run that a CTA ended with a trap.
    for bug in sorted(traps):
        out.append(GenCapture(f"gen_double_buffer_tma_{bug}_132ctas", "double_buffer_tma",
                              {**ring}, [bug], ctas=SM_COUNT, flush_every=1))
    out.append(GenCapture("gen_alternate_tiles", _pipe("alternate_tiles"), {"tiles": 12},
                          ctas=SM_COUNT))
    out.append(GenCapture("gen_alternate_tiles_forget_phase_toggle", _pipe("alternate_tiles"),
                          {"tiles": 12}, ["forget_phase_toggle"], ctas=1, **may_trap))
    # 2x1 clusters (cuLaunchKernelEx): one per SM pair; cluster 0 logs. A CTA ends when its
    # own agents are done, as the program's does, so a peer's remote arrive may reach an exited
    # CTA (no_producer_tail); records are copied out before every arrive, where that could trap.
    for bugs in ([], ["release_local_only"], ["expect_tx_one_cta"], ["no_producer_tail"]):
        name = "_".join(["gen_cluster_multicast", *bugs])
        out.append(GenCapture(name, "cluster_multicast", {"stages": 2, "tiles": 8}, bugs,
                              ctas=SM_COUNT, **may_trap))
    # A remote arrive into a CTA that has exited, in one cluster: the H200 never completes it,
    # so the kernel hangs and the runner keeps the log it has (`host_bound_s`); with the
    # cluster barrier before exit that the generator once ended every cluster kernel with, the
    # same kernel finishes: the barrier hides the bug (docs/gpu-capture.md, "How a cluster
    # kernel ends"). Raw logs only (ship.SKIPPED).
    for exit_sync in (False, True):
        out.append(GenCapture("gen_remote_after_exit" + ("_exit_sync" if exit_sync else ""),
                              _pipe("remote_after_exit"), {"rounds": 8}, ctas=2,
                              host_bound_s=3.0, exit_sync=exit_sync, **may_trap))
    out.extend(_real_bugs())
    out.extend(_families())
    # Register reconfiguration (setmaxnreg) in a warp-specialized ring; with greedy_consumers
    # the second `.inc` never finds its registers and, having no deadline, hangs the kernel
    # (the host bound ends it: raw log only, ship.SKIPPED).
    out.append(GenCapture("gen_register_handoff", _pipe("register_handoff"), {},
                          ctas=SM_COUNT, flush_before_arrive=True))
    out.append(GenCapture("gen_register_handoff_greedy_consumers", _pipe("register_handoff"), {},
                          ["greedy_consumers"], ctas=1, host_bound_s=3.0,
                          flush_before_arrive=True))
    return out


FAMILY_PROGRAMS = PIPELINES / "families"
"""The asynchronous and synchronization families' programs (tests/sim/test_* check their
rules), each the PTX text's own example."""
FAMILY_CAPTURES = (
    ("cp_async_mbarrier", ("inc", "noinc_and_arrive", "late_copy")),
    ("cp_async_groups", ("wait_one", "no_wait", "wait_all")),
    ("st_async", ("short",)),
    ("red_async", ("no_wait",)),
    ("tensor_box", ("in_bounds_bytes",)),
    ("wgmma_ring", ("release_before_wait", "no_fence")),
    ("bulk_reduce", ("read_only", "no_fence")),
    ("named_barrier", ("fixed",)),
    ("elected_lane", ("syncwarp_fix",)),
    ("cluster_init", ("release_arrive", "no_init_fence", "no_cluster_barrier")),
    ("partial_mask", ("no_warp_sync",)),
    ("bar_red", ()),
)
"""(program, its bug toggles) captured as written and with each toggle, on 132 CTAs (66
clusters where the program is a 2-CTA cluster), records copied out before every arrive."""


def _families() -> list[GenCapture]:
    out = []
    for program, bugs in FAMILY_CAPTURES:
        text = (FAMILY_PROGRAMS / f"{program}.pipe").read_text()
        for bug in (None, *bugs):
            name = f"gen_{program}" + (f"_{bug}" if bug else "")
            out.append(GenCapture(name, text, {}, [bug] if bug else [], ctas=SM_COUNT,
                                  flush_before_arrive=True))
    # bar.red with a count that leaves a warp out hangs every CTA (named barriers have no
    # deadline): one CTA, every record written through, so the log keeps what came before
    text = (FAMILY_PROGRAMS / "bar_red.pipe").read_text()
    out.append(GenCapture("gen_bar_red_short_count", text, {}, ["short_count"], ctas=1,
                          host_bound_s=3.0, flush_every=1))
    return out


REAL_BUG_CAPTURES = (
    ("tilelang_2566_single_iteration_hang", "bulk_1d_drops_arrive", SM_COUNT),
    ("mirage_705_box_bytes", "unclamped_box", SM_COUNT),
    ("tilelang_2674_persistent_phase", "phase_reset_per_tile", 1),  # may arrive twice: a trap
    ("flashkda_24_empty_sequence_fence", "zero_init_unfenced", SM_COUNT),
    ("flashkda_24_empty_sequence_fence", "fp32_state_unfenced", SM_COUNT),
    ("tilelang_2927_copy_cluster_parity", "loop_parity", SM_COUNT),
    ("deepgemm_415_multicast_straddle", "straddles_groups", SM_COUNT),
    ("vllm_26026_named_barrier_arrive", "early_return_arrive", SM_COUNT),
    ("triton_1278_wgmma_release", "wait_pendings_one", SM_COUNT),
)
"""The real-bug lessons captured (app/scenarios, group real_bugs, docs/lessons.md): each
correct at its defaults on 132 CTAs, and with the toggle on the CTAs given."""


def _real_bugs() -> list[GenCapture]:
    """Records copied out before every arrive in all of them, as `--pipeline` captures run, so a
    capture made with `--pipeline ID --name NAME --bugs B --ctas N` is this very entry."""
    out, seen = [], set()
    for scenario, bug, ctas in REAL_BUG_CAPTURES:
        if scenario not in seen:
            seen.add(scenario)
            out.append(GenCapture(f"gen_{scenario}", scenario, {}, [], ctas=SM_COUNT,
                                  flush_before_arrive=True))
        out.append(GenCapture(f"gen_{scenario}_{bug}", scenario, {}, [bug], ctas=ctas,
                              flush_before_arrive=True))
    return out


CAPTURES: dict[str, GenCapture] = {c.name: c for c in _entries()}


def keep_trapping_cta(raw: dict) -> dict:
    """A trap ends every CTA; of a log of many CTAs keep CTA 0 and the first CTA whose next
    move in the engine is the undefined behaviour that trapped (`replay_cta`), so the raw log
    stays small. `kept_ctas` says which CTAs' records remain."""
    from app.replay.gpu_order import replay

    found = None
    for cta in sorted({r[0] for r in raw["records"]}):
        state = replay(raw, cta)
        if state.divergence is None and any("engine's next move" in n for n in state.notes):
            found = cta
            break
    keep = {0} if found is None else {0, found}
    raw = dict(raw)
    raw["records"] = [r for r in raw["records"] if r[0] in keep]
    raw["kept_ctas"] = sorted(keep)
    if found is not None:
        raw["replay_cta"] = found
    return raw


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.capture.gen_capture",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated capture names")
    parser.add_argument("--pipeline", default="",
                        help="capture this pipeline instead: a built-in id or a .pipe file")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--bugs", default="", help="comma-separated bug toggles (--pipeline)")
    parser.add_argument("--ctas", type=int, default=1, help="CTAs launched (--pipeline)")
    parser.add_argument("--name", default="", help="the capture's name (--pipeline)")
    parser.add_argument("--out", required=True, help="folder for NAME.raw.json and NAME.cu")
    parser.add_argument("--sources-only", action="store_true", help="write the .cu files only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    captures = dict(CAPTURES)
    if args.pipeline:
        path = Path(args.pipeline)
        text = path.read_text() if path.suffix == ".pipe" else args.pipeline
        params = {}
        for item in args.param:
            key, _, value = item.partition("=")
            params[key] = int(value)
        name = args.name or f"gen_{path.stem if path.suffix == '.pipe' else args.pipeline}"
        captures = {name: GenCapture(name, text, params,
                                     [b for b in args.bugs.split(",") if b],
                                     ctas=args.ctas, flush_before_arrive=True)}
    names = [n for n in args.only.split(",") if n] or list(captures)
    unknown = [n for n in names if n not in captures]
    if unknown:
        parser.error(f"unknown capture(s): {', '.join(unknown)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in names:
        cap = captures[name]
        (out / f"{name}.cu").write_text(plan(cap).cuda)
        if args.sources_only:
            continue
        raw = capture(cap)
        if raw.get("error") and cap.log_ctas > 1:
            raw = keep_trapping_cta(raw)
        write_json(out / f"{name}.raw.json", raw)
        error = raw.get("error")
        log.info("%s: %d records, %s ms, error=%s", name, len(raw.get("records", [])),
                 raw.get("elapsed_ms"), error and (error.get("name"), error.get("message",
                                                                               "")[:300]))
        if error and not raw.get("records"):
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
