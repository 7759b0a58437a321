"""The parts of traces/probes.json made from measurements: each row beside the model's answer
(app.capture.probe_models), with one sentence of what the H200 did. `measured` None keeps the
previous file's figures (`--model-only`)."""

from __future__ import annotations

from .probe_models import (
    CTAS,
    DIFFERENCES,
    EXIT,
    EXIT_CLUSTERS,
    PHASES,
    exit_pipeline,
    model,
    no_complete_pipeline,
    pending_count_model,
    program_model,
)


def _scale_doc(measured: dict | None, previous: dict | None) -> dict:
    """The `scale`, `granularity` and `reuse_before_wait` parts of probes.json, each row with
    its `model`; `measured` None keeps the previous file's figures (`--model-only`)."""
    prev = previous or {}
    if measured is None:
        rows = (prev.get("scale") or {}).get("rows", [])
        pieces = (prev.get("granularity") or {}).get("rows", [])
        earlier = prev.get("reuse_before_wait") or {}
        reuse = earlier.get("measured") or earlier.get("counts")
    else:
        rows, pieces, reuse = measured["rows"], measured["pieces"], measured["reuse"]
    early = [r["announced"] for r in pieces if r.get("early")]
    smallest = min(early) if early else None
    for row in rows:
        row["model"] = model(row["announced"], len(row["copies"]), row["copies"][0])
    for row in pieces:  # the model given silicon's own piece size as its chunk
        row["model"] = model(row["announced"], 1, row["copies"][0], smallest or 1024)
    doc = {
        "scale": {"ctas": CTAS, "phases_per_cta": PHASES, "rows": rows},
        "granularity": {
            "piece_bytes": smallest,
            "rows": pieces,
            "evidence": _granularity(pieces, smallest),
        },
    }
    if reuse:
        missed = reuse.get("hung", 0)
        doc["reuse_before_wait"] = {
            "program": "warp 0 arrives twice back to back on a barrier of count 1 (phases 0 "
                       "and 1 complete) while warp 1 waits for phase 0 with try_wait.parity 0",
            "phases": reuse.get("phases"),
            "counts": {"saw_phase_0": reuse.get("completed"), "missed_it": missed},
            "measured": reuse,
            "outcome": (f"No trap, no error: the waiter saw phase 0 in {reuse.get('completed')} "
                        f"of {reuse.get('phases')} phases and missed it (the parity was back to "
                        f"0; it waited until its bound) in {missed}."),
            "model": "The engine names this `reuse_before_wait` at the second arrive (phase 0 "
                     "completed and no wait observed it), and the checker finds the waiter's "
                     "deadlock.",
        }
    return doc


def _granularity(pieces: list[dict], smallest: int | None) -> str:
    """What the piece rows say about the size of the pieces, in one sentence."""
    if not smallest:
        return "No announcement below the copy's size ever completed early."
    never = [r["announced"] for r in pieces if not r.get("early")]
    return (f"Announcing N bytes for one 4,096-byte copy completed the phase early for N = "
            f"{smallest} and up, but never for N = {', '.join(f'{n:,}' for n in never)}: a "
            f"copy's bytes reach the tx-count in pieces of {smallest} bytes or a multiple. The "
            "built-in pipelines group by chunk_bytes (1,024 by default), coarser than silicon, so "
            f"these rows' model uses {smallest}-byte chunks.")


def _no_complete_doc(measured: list[dict] | None, previous: dict | None) -> dict:
    """The `no_complete` part of probes.json: each `.noComplete` probe as silicon ran it, beside
    the model (`--model-only`: the previous measurements)."""
    rows = measured if measured is not None else \
        [dict(r) for r in ((previous or {}).get("no_complete") or {}).get("rows", [])]
    for row in rows:
        row["model"] = program_model(no_complete_pipeline(row["probe"]))
        if row["probe"] == "pending_count":
            row["model"]["pending_count"] = pending_count_model()
        row["silicon"] = _no_complete_seen(row)
        row["outcome"] = _no_complete_outcome(row)
    return {"no_complete": {
        "program": "one thread, one barrier, each launch in a process of its own; the thread "
                   "writes what it saw to mapped host memory, which survives a trap",
        "rows": rows}}


def _no_complete_seen(row: dict) -> list[str]:
    """What silicon showed, in the words of the model's `reachable`: where the undefined
    arrive ran, `no_complete` (PTX leaves what follows undefined, so any behaviour is that
    ending); the pending_count probe ends `done`."""
    if row["probe"] == "pending_count":
        return ["done"] if row.get("reached") == 4 and not row.get("error") else []
    return ["no_complete"] if row.get("reached", 0) >= 1 else []


def _no_complete_outcome(row: dict) -> str:
    """One sentence: what the H200 did."""
    error = row.get("error")
    trap = f"trapped ({error['name']}: {error['message']})" if error else "no trap"
    if row["probe"] == "pending_count":
        return (f"pending_count read {row.get('pending_count')} ({trap}); the model reads "
                f"{(row.get('model') or {}).get('pending_count')}.")
    if not row.get("no_complete_returned"):
        return f"The noComplete arrive never returned: {trap}."
    done = "completed" if row.get("phase0_completed") else "did not complete"
    text = (f"The noComplete arrive returned and phase 0 {done} (token parity "
            f"{row.get('token_parity')}, pending_count {row.get('pending_count')}); ")
    if row.get("later_arrive_returned"):
        text += (f"a later plain arrive returned too (parity after it "
                 f"{row.get('parity_after_later_arrive')}, at the end "
                 f"{row.get('parity_at_end')}); {trap}.")
    else:
        text += f"the later plain arrive did not return: {trap}."
    return text


def _exit_doc(measured: list[dict] | None, previous: dict | None) -> dict:
    """The `remote_after_exit` part of probes.json: each variant's launches summed, beside the
    model (`--model-only`: the previous measurements)."""
    if measured is None:
        rows = [dict(r) for r in ((previous or {}).get("remote_after_exit") or {}).get("rows",
                                                                                     [])]
    else:
        rows = [_exit_row(m) for m in measured]
    for row in rows:
        row["silicon"] = _exit_seen(row, EXIT[row["probe"]][0])
        row["model"] = program_model(exit_pipeline(row["probe"]))
        differs = {k: DIFFERENCES[k] for k in row.get("silicon") or []
                   if k not in row["model"]["reachable"] and k in DIFFERENCES}
        if differs:
            row["model"]["differs"] = differs
    return {"remote_after_exit": {
        "program": f"{EXIT_CLUSTERS} clusters of 2 CTAs a launch; CTA 1 exits right after "
                   "the start cluster barrier, CTA 0 reaches into it after a delay; each "
                   "variant's launches run in processes of their own (a trap ends one)",
        "clusters_per_launch": EXIT_CLUSTERS, "rows": rows}}


def _exit_row(measured: dict) -> dict:
    probe = measured["probe"]
    mode, delay_us, what = EXIT[probe]
    runs = measured["runs"]
    total = {k: sum(r.get(k) or 0 for r in runs)
             for k in ("clusters", "reached", "remote_returned", "returned",
                       "peer_exit_recorded", "after_peer_exit")}
    gaps = [r["gap_cycles"] for r in runs if r.get("gap_cycles")]
    endings = {k: sum(1 for r in runs if r["ending"] == k) for k in ("finished", "trapped",
                                                                      "hung")}
    errors = sorted({f"{r['error']['name']}: {r['error']['message']}" for r in runs
                     if r.get("error")})
    row = {"probe": probe, "program": what, "delay_us": delay_us, "launches": len(runs),
           "endings": endings, "errors": errors, **total,
           "gap_cycles": ({"min": min(g["min"] for g in gaps),
                           "max": max(g["max"] for g in gaps),
                           "medians": [g["median"] for g in gaps]} if gaps else None),
           "runs": runs}
    if mode == 0:
        row["peer_saw_arrive"] = sum(r.get("peer_saw_arrive") or 0 for r in runs)
    if mode == 2:
        row["own_half_landed"] = sum(r.get("own_half_landed") or 0 for r in runs)
        row["own_half_gave_up"] = sum(r.get("own_half_gave_up") or 0 for r in runs)
    row["silicon"] = _exit_seen(row, mode)
    row["outcome"] = _exit_outcome(row, mode)
    return row


def _exit_seen(row: dict, mode: int) -> list[str]:
    """What silicon showed, in the words of the model's `reachable`. The control (the peer
    alive): `done` when CTA 1 saw every arrive, `deadlock` when its wait gave up, `hung` for a
    launch that never finished. A launch that reached into the exited CTA: `remote_after_exit`
    whatever followed (the access lost silently, a trap, or a fence after it that never
    returned): the model stops there, since what follows is undefined."""
    seen = set()
    e = row["endings"]
    if mode == 0:
        if e["hung"]:
            seen.add("hung")
        if e["finished"]:
            seen.add("done" if row.get("peer_saw_arrive") == row["clusters"] else "deadlock")
        return sorted(seen)
    if e["finished"] or e["trapped"] or e["hung"]:
        seen.add("remote_after_exit")
    return sorted(seen)


def _exit_outcome(row: dict, mode: int) -> str:
    e = row["endings"]
    parts = [f"{row['launches']} launches of {EXIT_CLUSTERS} clusters: {e['finished']} "
             f"finished, {e['trapped']} trapped, {e['hung']} hung"]
    if row["errors"]:
        parts.append("errors: " + "; ".join(row["errors"]))
    if mode == 0:
        parts.append(f"CTA 1 saw the arrive in {row.get('peer_saw_arrive')} of "
                     f"{row['clusters']} clusters")
    else:
        parts.append(f"CTA 0 issued the remote {'copy' if mode == 2 else 'arrive'} in "
                     f"{row['reached']} of {row['clusters']} clusters ({row['after_peer_exit']} "
                     "after CTA 1's last instruction by the SMs' clocks); the instruction "
                     f"returned in {row['remote_returned']}"
                     + ("" if mode == 3 else ", and the thread got past the fence after it "
                                             f"in {row['returned']}"))
    if mode == 2:
        parts.append(f"its own half landed in {row.get('own_half_landed')}, its bounded wait "
                     f"gave up in {row.get('own_half_gave_up')}")
    return "; ".join(parts) + "."
