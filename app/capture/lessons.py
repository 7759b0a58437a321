"""The lesson text shipped with each GPU trace: what it shows, in figures read off the trace.

Each text is written from the decoded trace (its status, diagnostics, `source.ctas` and
`source.figures`), so a regenerated trace explains itself with its own numbers; `make_all` stores
it as `source.lesson`. A trace whose conformance found divergences says why here.
"""

from __future__ import annotations


def _kinds(doc: dict, kind: str) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["kind"] == kind]


def _span_us(doc: dict) -> str:
    span = doc["source"].get("logged_span_ns") or 0
    return f"{span / 1000:.1f} us"


def _ctas(doc: dict) -> str:
    ctas = doc["source"].get("ctas", {})
    launched = ctas.get("launched", 1)
    if launched <= 1:
        return ""
    parts = [f"{launched} CTAs ran the same code (CTA 0 is shown)"]
    if doc["scenario"]["id"] == "proxy_fence_store":
        tiles = launched * doc["scenario"]["params"]["tiles"]
        parts.append(f"{ctas.get('dst_tiles_wrong', 0)} of {tiles} tiles came out wrong in "
                     f"global memory")
    elif "tiles_read" in ctas:
        parts.append(f"{ctas['tiles_read_wrong']} of {ctas['tiles_read']} tiles were read wrong "
                     f"in {ctas['ctas_with_wrong_reads']} CTAs")
        parts.append(f"{ctas['timed_out']} CTAs gave up waiting")
    return " Over the whole launch: " + "; ".join(parts) + "."


def _wrong(doc: dict) -> tuple[int, int]:
    f = doc["source"]["figures"]
    return f["tiles_read_wrong"], f["tiles_read"]


def _divergences(doc: dict) -> str:
    found = _kinds(doc, "divergence")
    if not found:
        return ""
    return (f" Conformance: {len(found)} observation(s) the barrier model cannot explain (see the "
            f"divergence diagnostics); they are what PTX leaves undefined, and the hardware chose.")


def lesson(name: str, doc: dict) -> str:
    """A short paragraph for the trace `name` (a key of make_all.CAPTURES)."""
    status = doc["status"]
    params = doc["scenario"]["params"]
    stages = params.get("stages", 1)
    wrong, read = _wrong(doc)
    stale_waits = len(_kinds(doc, "stale_wait"))
    base = f"Captured on an {doc['source'].get('device', 'NVIDIA GPU')}. "
    if name == "single_barrier":
        text = (f"One warp drives one mbarrier by hand for {params['tiles']} tiles: "
                f"arrive.expect_tx, {params['tile_bytes'] // params['chunk_bytes']} bulk copies "
                f"of {params['chunk_bytes']} bytes, try_wait.parity with the phase bit flipped "
                f"every tile. Every arrive token and every wait agrees with the model; all "
                f"{read} tiles read correct in {_span_us(doc)}.")
    elif name == "single_barrier_forget_phase_toggle":
        text = (f"The same warp never flips its phase bit. On every odd tile the barrier is still "
                f"in the phase of that tile, whose parity is 1, so try_wait.parity 0 returns at "
                f"once: {stale_waits} stale waits, each about 60 ns. The copy was still landing: "
                f"{wrong} of those {stale_waits} tiles were read with words of the previous tile "
                f"(the partial_read diagnostics name them); the others won the race by luck.")
    elif name.startswith("double_buffer_tma_") and name.endswith("stage") and "toggle" not in name:
        text = (f"The producer/consumer ring with {stages} stage{'s' if stages > 1 else ''}: "
                f"producer_acquire, arrive.expect_tx and the chunked bulk load; consumer_wait, "
                f"the read, a bulk store, wait_group.read, consumer_release. {read} tiles, none "
                f"read wrong, in {_span_us(doc)}; every token and wait agrees with the model."
                f"{_ctas(doc)}")
    elif name == "double_buffer_tma_2consumers":
        text = (f"Two consumer warps share each stage; empty_barrier expects 2 arrivals, and each "
                f"token shows the arrival count going 2 -> 1 -> 0. {read} tile reads, none "
                f"wrong.{_ctas(doc)}")
    elif name == "double_buffer_tma_forget_phase_toggle_stale":
        text = (f"The phase bug with 1 stage: the consumer waits parity 0 on every tile. Each odd "
                f"tile's wait returns at once on the previous tile's completed phase, "
                f"{stale_waits} stale waits; {wrong} of {read} tiles were read with words of the "
                f"previous tile because the copy was still landing. Nothing hangs: the even "
                f"tiles' waits line up with the barrier again.{_ctas(doc)}")
    elif name.startswith("double_buffer_tma_forget_phase_toggle"):
        text = (f"The phase bug with {stages} stages: the first {stages} tiles are fine, then the "
                f"consumer comes back to full_barrier[0] with parity 0 after the next copy has "
                f"already landed, so the barrier is in a new phase of parity 0 that nobody will "
                f"complete: the consumer waits for ever, the producer waits for its release, and "
                f"the bounded waits end the kernel ({status}).{_ctas(doc)}")
    elif name == "double_buffer_tma_forget_producer_phase_toggle_1stage":
        text = ("The producer bug with 1 stage: the producer's wait for tile 1 passes at once "
                "(empty_barrier still has parity 0) and its arrive.expect_tx reaches "
                "full_barrier[0] while tile 0's copy is still landing: a second arrive in one "
                "phase, and the GPU traps within the first microseconds. The hardware_trap "
                "diagnostic says which operation the model points at.")
    elif name.startswith("double_buffer_tma_forget_producer_phase_toggle"):
        text = (f"The producer always waits parity 1 on empty_barrier, so whenever the consumer "
                f"has not released a stage yet (parity still 0) its wait passes at once "
                f"({stale_waits} stale waits): it loads over tiles still in use (overwrite) and "
                f"arrives again on a full_barrier whose copy has not landed, a second "
                f"arrive.expect_tx in one phase. Hopper traps on that: the kernel ended with "
                f"{doc['source'].get('error', {}) and doc['source']['error'].get('name')}, and "
                f"the log in mapped host memory kept every event before it.{_ctas(doc)}")
    elif name == "double_buffer_tma_producer_skips_empty_wait":
        text = ("The producer never waits on empty_barrier: its second arrive.expect_tx reaches "
                "full_barrier[0] before the first copy landed, and the GPU traps at once.")
    elif name == "double_buffer_tma_consumer_skips_release":
        text = (f"The consumer never arrives on empty_barrier: after {stages} tiles the producer "
                f"waits for a release that never comes, the consumer for a tile never loaded, and "
                f"the bounded waits end the kernel (deadlock).")
    elif name == "double_buffer_tma_wrong_arrival_count":
        overwrites = len(_kinds(doc, "overwrite"))
        slipped = (f" The producer slipped in between two releases {overwrites} time(s) and "
                   f"loaded over a tile still in use." if overwrites else "")
        reordered = doc["source"]["figures"]["reordered"]
        close = (f" The consumers' arrives and the producer's wait came within a few hundred "
                 f"cycles of each other; the replay put {reordered} of them in the order their "
                 f"tokens and wait results prove." if reordered else "")
        text = (f"empty_barrier is initialized with count 1 but two consumers arrive: each "
                f"arrival completes a phase on its own (every token shows 1 arrival pending), so "
                f"one tile's releases move the barrier two phases, back to the parity the "
                f"producer waits on, and it waits for ever ({status}).{slipped}{close}"
                f"{_ctas(doc)}")
    elif name == "double_buffer_tma_expect_tx_long":
        text = ("arrive.expect_tx announces one chunk more than the copy delivers: the phase "
                "waits for bytes that never come, and the consumer's first wait gives up "
                "(deadlock).")
    elif name == "double_buffer_tma_expect_tx_short":
        text = ("arrive.expect_tx announces one chunk less than the copy delivers. The model says "
                "the phase completes after three chunks and the fourth counts toward the next "
                "phase (tx-count -1024); on this run the H200 never completed the phase at all, "
                "and the consumer gave up. PTX leaves bytes beyond the expected count "
                "undefined; on an earlier run the same kernel completed normally.")
    elif name == "proxy_fence_store":
        text = (f"A warp writes each tile with st.shared, runs fence.proxy.async.shared::cta, and "
                f"a bulk store copies it out; {stages} buffers rotate through "
                f"wait_group.read {stages - 1}. Every tile arrives intact.{_ctas(doc)}")
    elif name == "proxy_fence_store_missing_proxy_fence":
        bad = doc["source"]["ctas"].get("dst_tiles_wrong", 0)
        total = doc["source"]["ctas"]["launched"] * params["tiles"]
        text = (f"The same without fence.proxy.async: PTX lets the bulk store (async proxy) read "
                f"the bytes from before the threads' writes, and every store is flagged. On "
                f"this run {bad} of {total} tiles came out wrong in global memory: the race is "
                f"real but rarely lost on an H200, which is why the fence is easy to forget.")
    else:
        text = f"{status} after {doc['total_steps']} steps."
    return base + text + _divergences(doc)
