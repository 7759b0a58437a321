"""SPIN on the exported Promela models (app/check/promela.py): on every small built-in
configuration and toggle, SPIN and the checker reach the same kinds, and pan's stored states are
the unreduced search's plus one (the state before the initialising step); livelock as a
non-progress cycle agrees on the loop programs; a SPIN trail replays on the engine.

pan is built at -O0 here (the bench builds it at -O2): these state spaces are small and gcc's
time dominates. Skipped only where `spin` or `gcc` is missing (`make test` installs Debian's
spin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.check.engine import Explorer, Limits
from app.check.promela import NotExported, export
from app.check.promela_spin import (
    Pan,
    SpinMissing,
    count_states,
    model_text,
    reachable,
    schedule,
    tools,
)
from app.cli import main
from app.scenarios import from_source, get

from . import programs
from .helpers import STATE_BOUND, kinds_at_last_step, replay

try:
    tools()
except SpinMissing as err:
    pytest.skip(str(err), allow_module_level=True)

PIPELINES = Path(__file__).resolve().parents[2] / "bench" / "pipelines"
UNREDUCED = Limits(max_states=120_000, timeout_s=3600.0)
OPT = "-O0"


def scenario(name: str):
    if name.startswith("ws_"):
        return from_source((PIPELINES / f"{name}.pipe").read_text())
    return get(name)


def cfg_of(name: str, bugs=(), **params):
    return scenario(name).resolve(params, list(bugs))


RING = {"stages": 2, "tiles": 3, "consumers": 1}
SMALL = [
    ("single_barrier", {"tiles": 2}, None),
    ("single_barrier", {"tiles": 3}, "forget_phase_toggle"),
    ("single_barrier", {"tiles": 2}, "expect_tx_short"),
    ("single_barrier", {"tiles": 2}, "expect_tx_long"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1}, None),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 2}, None),
    *[("double_buffer_tma", RING, bug) for bug in (
        "forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
        "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait")],
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 2}, "wrong_arrival_count"),
    ("proxy_fence_store", {"stages": 2, "tiles": 3}, None),
    ("proxy_fence_store", {"stages": 2, "tiles": 3}, "missing_proxy_fence"),
    ("cluster_multicast", {"stages": 1, "tiles": 1}, None),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, "release_local_only"),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, "expect_tx_one_cta"),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, "no_producer_tail"),
    ("ws_1x1", {"stages": 2, "iterations": 3}, None),
    ("ws_1x1", {"stages": 2, "iterations": 3}, "tail_from_start"),
    ("ws_2x1", {"stages": 2, "iterations": 2}, None),
    ("ws_2x1", {"stages": 2, "iterations": 2}, "no_producer_tail"),
    ("ws_2x1", {"stages": 2, "iterations": 3}, "tail_from_start"),
]
LARGER = [
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 2}, None),
    *[("double_buffer_tma", {"stages": 2, "tiles": 4, "consumers": 2}, bug) for bug in (
        "forget_phase_toggle", "expect_tx_short", "consumer_skips_release")],
    ("cluster_multicast", {"stages": 1, "tiles": 2}, None),
    ("cluster_multicast", {"stages": 2, "tiles": 2}, "no_producer_tail"),
    ("ws_2x1", {"stages": 3, "iterations": 4}, None),
]


def _agree(tmp_path, name, params, bug):
    cfg = cfg_of(name, [bug] if bug else [], **params)
    checker = Explorer(cfg).explore(STATE_BOUND)
    assert checker.complete
    spin = reachable(cfg, tmp_path / "reach", optimize=OPT, count=True)
    assert all(run.complete for run in spin.values())
    states = spin.pop("count").states
    assert {k for k, run in spin.items() if run.reached} == set(checker.found)
    plain = Explorer(cfg, reduce=False).explore(UNREDUCED)
    if plain.complete:
        assert set(plain.found) == set(checker.found)
        assert states == plain.states + 1


@pytest.mark.parametrize(("name", "params", "bug"), SMALL)
def test_spin_and_the_checker_agree(tmp_path, name, params, bug):
    _agree(tmp_path, name, params, bug)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "params", "bug"), LARGER)
def test_spin_and_the_checker_agree_larger(tmp_path, name, params, bug):
    _agree(tmp_path, name, params, bug)


@pytest.mark.parametrize("source", ["SPIN", "SPIN_WITH_PRODUCER", "BOTTOM", "INTERMITTENT",
                                    "LOCAL_LOOP_WITH_PRODUCER", "SPINNERS",
                                    "SPINNERS_WITH_PRODUCER"])
def test_livelock_is_a_non_progress_cycle(tmp_path, source):
    cfg = programs.config(getattr(programs, source))
    checker = Explorer(cfg).explore(STATE_BOUND)
    assert checker.complete
    spin = reachable(cfg, tmp_path, livelock=True, optimize=OPT)
    assert {k for k, run in spin.items() if run.reached} == set(checker.found)


def test_tcgen05_is_refused_naming_the_line():
    with pytest.raises(NotExported, match=r"line \d+ .*tcgen05.mma.* not exported"):
        export(cfg_of("kloop_tma_mma", stages=1, tiles=2))


def test_a_spin_trail_replays_on_the_engine(tmp_path, capsys):
    cfg = cfg_of("double_buffer_tma", ["forget_phase_toggle"], **RING)
    text = model_text(cfg, {"scenario": "double_buffer_tma"})
    pan = Pan(text, tmp_path, optimize=OPT, small=True)
    run = pan.run("partial_read")
    assert run.reached and run.trail is not None
    moves, cycle = pan.moves()
    assert cycle is None and moves
    names = schedule(cfg, moves)
    assert "partial_read" in kinds_at_last_step(replay(cfg, names))
    assert main(["trail", str(run.trail)]) == 0
    out = capsys.readouterr().out
    assert f"partial_read at step {len(names)}" in out
    assert "--schedule manual" in out


def test_a_livelock_trail_replays_as_a_livelock(tmp_path, capsys):
    source = programs.SPIN
    cfg = from_source(source).resolve({}, [])
    pan = Pan(model_text(cfg, {"source": source}), tmp_path, "livelock", optimize=OPT,
              small=True)
    run = pan.run("livelock")
    assert run.reached and run.trail is not None
    assert main(["trail", "--livelock", str(run.trail)]) == 0
    assert "status livelock" in capsys.readouterr().out


def test_the_count_variant_counts_the_same(tmp_path):
    cfg = cfg_of("cluster_multicast", ["no_producer_tail"], stages=1, tiles=2)
    plain = Explorer(cfg, reduce=False).explore(UNREDUCED)
    assert plain.complete
    assert count_states(cfg, tmp_path, optimize=OPT).states == plain.states + 1


def test_the_promela_command_writes_a_model_spin_accepts(tmp_path, capsys):
    out = tmp_path / "ring.pml"
    assert main(["promela", "double_buffer_tma", "--stages", "1", "--tiles", "2",
                 "-o", str(out)]) == 0
    assert "MBI_QUERY=n ./pan -E" in capsys.readouterr().err
    pan = Pan(out.read_text(), tmp_path / "pan", "count", optimize=OPT, small=True)
    plain = Explorer(cfg_of("double_buffer_tma", stages=1, tiles=2, consumers=1),
                     reduce=False).explore(UNREDUCED)
    assert pan.run(None).states == plain.states + 1
    assert main(["promela", "kloop_tma_mma"]) == 2
    assert "not exported" in capsys.readouterr().err
