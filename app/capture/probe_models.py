"""What the tx-count probes are (their tables) and what the model says of each: the probe
written in the pipeline language, the schedule checker's reachable endings, and the barrier
model's pending count. No GPU and no web layer: tests and `--model-only` run it on a CPU."""

from __future__ import annotations

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


DIFFERENCES: dict[str, str] = {}
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
    """The barrier model's answer for the pending_count probe: the pending count of each
    `arrive.noComplete` token, the arrivals pending prior to that arrive (PTX 9.7.13.15.17),
    as `POST /api/v1/mbarrier/run` answers it (tests/capture/test_probes_shipped.py checks the
    route gives the same). The model itself, so a GPU machine without the web layer runs it."""
    from app.sim.barrier import Mbarrier

    barrier = Mbarrier()
    barrier.init(NO_COMPLETE["pending_count"][1])
    counts = []
    for _ in range(2):  # neither arrive completes the phase: no undefined behaviour
        counts.append(barrier.pending_arrivals)
        barrier.arrive(1)
    return counts
