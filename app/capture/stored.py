"""What a generated kernel's bulk stores left in global memory (a raw log's `dst`), read on the
host after the launch: which tiles' words each element written by a store holds.

A store reads its stage in chunks while a copy may land in it (a producer's next load, the bug
of `forget_producer_phase_toggle`): one element then holds words of two tiles. Per element the
report gives the tile numbers found (most words first), and per chunk of the element the same
(`cta0_chunks`, chunks of the program's smallest stage chunk), so the replay can tell which tile
each chunk of the store's read saw (app.replay.gpu_end)."""

from __future__ import annotations


def _tiles(words, top: int = 4) -> list[list[int]]:
    """The tile numbers (bits 16..31 of each word) found in `words`, most first."""
    import numpy as np

    tiles = (words >> 16).astype(np.int64) & 0xFFFF
    values, counts = np.unique(tiles, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:top]
    return [[int(values[i]), int(counts[i])] for i in order]


def chunk_bytes(program) -> int | None:
    """The chunk a store reads its stage in: the program's smallest stage chunk."""
    sizes = [s.chunk_bytes for s in program.stages]
    return min(sizes) if sizes else None


def stored_report(after, before, p) -> dict:
    """Per tensor written by a bulk store: CTA 0's elements (`cta0`), their chunks
    (`cta0_chunks`, `chunk_bytes` each) and over all CTAs how many elements changed."""
    lay = p.layout
    out = {}
    written = {line.args[0].array for a in p.program.agents for line in a.nodes
               if getattr(line, "kind", None) == "store"}
    cb = chunk_bytes(p.program)
    for t, (name, elements, nbytes) in enumerate(p.program.tensors):
        if name not in written:
            continue
        per = nbytes // 4
        first = lay.tensor_offsets[t] // 4
        block = after[:, first:first + elements * per].reshape(after.shape[0], elements, per)
        orig = before[:, first:first + elements * per].reshape(before.shape[0], elements, per)
        cta0 = [_tiles(block[0, k]) for k in range(elements)]
        changed = int((block != orig).any(axis=2).sum())
        out[name] = {"cta0": cta0, "changed_all_ctas": changed,
                     "elements_all_ctas": int(block.shape[0] * elements)}
        if cb and nbytes % cb == 0 and nbytes > cb:
            words = cb // 4
            out[name]["chunk_bytes"] = cb
            out[name]["cta0_chunks"] = [
                [_tiles(block[0, k, c * words:(c + 1) * words]) for c in range(nbytes // cb)]
                for k in range(elements)]
    return out
