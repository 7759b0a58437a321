"""A store that read its stage while the next load landed in it (the one-stage ring with
`forget_producer_phase_toggle`): the raw log's per-chunk report (`dst.out.cta0_chunks`,
app/capture/stored.py) says which tile each chunk of the store's read saw, and the replay lands
the load around the store's chunk reads to match, or says why it cannot. Doctored from the
shipped log (CPU only)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.capture.codegen import KIND_CODE
from app.replay.gpu_order import conformance

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"
NAME = "gen_double_buffer_tma_1stage_forget_producer_phase_toggle"


def _chunked(first_read_ok: int | None = None) -> dict:
    """The shipped log with a per-chunk report that agrees with its per-element one; the
    consumer's first read said to find `first_read_ok` as its mask of right chunks."""
    raw = json.loads((RAW / f"{NAME}.raw.json").read_text())
    out = raw["dst"]["out"]
    out["chunk_bytes"] = 1024
    out["cta0_chunks"] = [[[[e[0][0], 256]] for _ in range(4)] for e in out["cta0"]]
    if first_read_ok is not None:
        row = next(r for r in raw["records"] if r[4] & 0xFF == KIND_CODE["ld_shared"])
        row[7] = first_read_ok
    return raw


def _out0(raw: dict, chunks: list[list[int]]) -> dict:
    raw = copy.deepcopy(raw)
    raw["dst"]["out"]["cta0_chunks"][0] = [[[t, 256 // len(c)] for t in c] for c in chunks]
    counts: dict[int, int] = {}
    for c in chunks:
        for t in c:
            counts[t] = counts.get(t, 0) + 256 // len(c)
    raw["dst"]["out"]["cta0"][0] = sorted(([t, n] for t, n in counts.items()),
                                          key=lambda e: -e[1])
    return raw


def test_a_per_chunk_report_that_agrees_with_the_element_conforms_and_is_checked_by_chunk():
    report = conformance(_chunked())
    assert report["matches"], report["first_divergence"]
    from app.replay.gpu_order import replay

    seen = [o["what"] for o in replay(_chunked()).observations]
    assert "out[0] by chunk in global memory" in seen


@pytest.mark.parametrize("pattern", [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0]])
def test_a_store_that_read_some_chunks_of_each_tile_conforms(pattern):
    """The consumer's read found chunk 0 overwritten by tile 1 (its mask of right chunks
    0b1110); the store after it read out[0] chunk by chunk while tile 1's copy landed: the
    engine lands the load's chunks between the store's reads where the GPU's chunks say so."""
    raw = _out0(_chunked(first_read_ok=0b1110), [[t] for t in pattern])
    report = conformance(raw)
    assert report["matches"], report["first_divergence"]


def test_a_chunk_holding_words_of_two_tiles_agrees_with_a_note():
    """Silicon lands a copy in 32-byte pieces (traces/probes.json), finer than a chunk: a
    chunk of the store's read may hold both tiles; the engine's read of either agrees."""
    raw = _out0(_chunked(), [[1], [1], [1, 0], [1]])
    report = conformance(raw)
    assert report["matches"], report["first_divergence"]
    assert any("chunk 2 held words of tiles 0 and 1" in n for n in report["notes"])


def test_chunks_that_need_the_copy_to_land_out_of_order_diverge_and_say_so():
    """The read found only chunk 3 overwritten (as the shipped log has it) and the store's
    chunks 0-2 kept tile 0: the copy landed chunk 3 first. The engine lands a copy's chunks in
    order, so it cannot reach this; the divergence says why (docs/gpu-capture.md)."""
    raw = _out0(_chunked(), [[0], [0], [0], [1]])
    report = conformance(raw)
    assert not report["matches"]
    why = report["first_divergence"]["why"]
    assert "out[0] by chunk" in why and "lands a copy's chunks in order" in why


def test_the_runner_reports_each_chunk_of_a_stored_element():
    np = pytest.importorskip("numpy")
    from types import SimpleNamespace

    from app.capture.stored import stored_report
    from app.scenarios import catalogue

    cfg = catalogue()["double_buffer_tma"].resolve({"stages": 1, "tiles": 2}, [])
    program = cfg.program
    t_out = [name for name, _, _ in program.tensors].index("out")
    offsets = [0, 2 * 4096]
    layout = SimpleNamespace(tensor_offsets=offsets)
    before = np.zeros((1, 4 * 4096 // 4), dtype=np.uint32)
    after = before.copy()
    first = offsets[t_out] // 4
    words = np.arange(1024, dtype=np.uint32)
    after[0, first:first + 1024] = np.where(words < 768, words, (1 << 16) | words)
    report = stored_report(after, before, SimpleNamespace(program=program, layout=layout))
    out = report["out"]
    assert out["chunk_bytes"] == 1024
    assert out["cta0"][0] == [[0, 768], [1, 256]]
    assert out["cta0_chunks"][0] == [[[0, 256]], [[0, 256]], [[0, 256]], [[1, 256]]]
