"""The title and lesson shipped with each GPU replay, written from the replay's own figures.

A lesson is one paragraph: what the pipeline is (the scenario's summary or the pipeline text's
leading comment, and each bug toggle's own description), how CTA 0 ended on the GPU, what the
engine's diagnostics point at, what the whole launch reported (`source.ctas`) and the verdict of
the replay in the GPU's order. Rules read the figures, not the replay's name, so a new capture
explains itself; `app.capture.ship` stores the text as `source.lesson`.
"""

from __future__ import annotations

from collections import Counter

from app.lang.compiler import load
from app.scenarios import catalogue

PARAM_WORDS = (("stages", "stage"), ("tiles", "tile"), ("consumers", "consumer"))


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _leading_comment(source: str) -> str:
    lines = []
    for line in source.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head.rstrip(".") if dot or text.endswith(".") else text


def describe(doc: dict) -> str:
    """What the pipeline is, in one sentence."""
    scenario_id = doc["scenario"].get("id")
    builtins = catalogue()
    if scenario_id in builtins:
        scenario = builtins[scenario_id]
        return f"{scenario.title} ({scenario.summary.rstrip('.')})"
    return _first_sentence(_leading_comment(doc["source"].get("pipeline") or ""))


def title(doc: dict) -> str:
    """The catalogue's line: the pipeline, its parameters and launch, its bugs."""
    scenario_id = doc["scenario"].get("id")
    builtins = catalogue()
    if scenario_id in builtins:
        name = builtins[scenario_id].title
    else:
        name = _first_sentence(_leading_comment(doc["source"].get("pipeline") or ""))
        name = name.split(":")[0].split(" (")[0] or "A pipeline of its own"
    params = doc["scenario"]["params"]
    shown = [_plural(params[k], word) for k, word in PARAM_WORDS if k in params]
    launched = doc["source"]["ctas"]["launched"]
    if launched > 1:
        shown.append(f"{launched} CTAs")
    shown = f" ({', '.join(shown)})" if shown else ""
    bugs = doc["scenario"]["bugs"]
    return f"{name}{shown}: {', '.join(bugs) if bugs else 'correct'}"


def _bug_sentences(doc: dict) -> list[str]:
    toggles = {t["name"]: t["description"] for t in load(doc["source"]["pipeline"]).toggles()}
    return [f"With {bug}, {toggles.get(bug, 'a bug toggle is on')}."
            for bug in doc["scenario"]["bugs"]]


def _reads(doc: dict) -> tuple[int, int]:
    reads = [o for o in doc["source"]["observed"] if o["what"].startswith("read ")]
    wrong = [o for o in reads if o["gpu"] != "all chunks right"]
    return len(wrong), len(reads)


def _span_us(doc: dict) -> float:
    times = [s["time_ns"] for s in doc["steps"]]
    return (times[-1] - times[0]) / 1000 if times else 0.0


def _gave_up(source: dict) -> bool:
    """Whether a bounded wait of CTA 0 logged its timeout (a wait with no deadline, such as a
    named barrier's, only hangs the launch)."""
    return any("gave up" in o["what"] for o in source["observed"])


def _outcome(doc: dict) -> str:
    source = doc["source"]
    conformance = source["conformance"]
    gpu = conformance["status"]["gpu"]
    device = source["device"].get("device", "GPU")
    unit = "cluster" if (source.get("launch") or {}).get("cluster", 1) > 1 else "CTA"
    head = f"On the {device}, {unit} {source.get('cta', 0)} logged " \
           f"{_plural(conformance['gpu_records'], 'operation')} over {_span_us(doc):,.1f} us"
    if gpu == "done":
        head += " and every warp finished"
    elif gpu == "deadlock" and not _gave_up(source):
        head += ("; then the launch hung: a wait the kernel gives no deadline (a named "
                 "barrier's) never returned, and the host ended it "
                 f"({(source.get('error') or {}).get('name')})")
    elif gpu == "deadlock":
        head += (" until a bounded wait gave up after "
                 f"{(source['launch'].get('deadline_cycles') or 0) / 1.98e3:,.0f} us "
                 "(the kernel's view of a deadlock)")
    elif gpu == "hardware_trap":
        head += f"; then the launch trapped ({(source.get('error') or {}).get('name')})"
    elif gpu == "undefined_behavior":
        head += "; then a warp stopped on an operand out of range"
    wrong, reads = _reads(doc)
    if reads:
        head += f"; {wrong} of its {_plural(reads, 'read')} found wrong words"
    return head + "."


def _notices(doc: dict) -> list[str]:
    """What the student should notice, one sentence per kind of diagnostic the engine raised."""
    source = doc["source"]
    kinds = Counter(d["kind"] for d in doc["diagnostics"])
    bugs = doc["scenario"]["bugs"]
    ctas = source["ctas"]
    wrong, _ = _reads(doc)
    held = source["conformance"]["landings_held"]
    out = []
    if not kinds and doc["status"] == "done" and bugs:
        out.append("This run's timing did not expose the bug: every token and wait agrees "
                   "with the engine, which raised nothing in the GPU's order; checking every "
                   "schedule finds the order in which it does.")
    elif not kinds and doc["status"] == "done":
        out.append("Every arrive token (its phase bit and pending count) and every wait "
                   "result is what the engine predicts: the protocol working as written.")
    if kinds["stale_wait"]:
        out.append(f"Notice the {_plural(kinds['stale_wait'], 'wait')} that returned at once "
                   "on a phase that had already completed (stale_wait): the parity named the "
                   "wrong use of the barrier.")
    torn = kinds["stale_read"] + kinds["partial_read"]
    if torn and wrong:
        out.append(f"The engine flags {_plural(torn, 'read')} of a stage whose tile had not "
                   f"all landed (stale_read, partial_read), and the GPU's words agree: "
                   f"{wrong} read{'s' if wrong != 1 else ''} in CTA 0 found another tile's "
                   "words.")
    elif torn:
        out.append(f"The engine flags {_plural(torn, 'read')} of a stage whose tile had not "
                   "all landed, yet on this run CTA 0's reads found the right words: the race "
                   "was won, not avoided.")
    if kinds["overwrite"] and not bugs and not ctas["reads_wrong"]:
        out.append(f"The {_plural(kinds['overwrite'], 'overwrite')} are the engine's detector "
                   "assuming every reader of a stage array reads every tile (docs/language.md); "
                   "these readers split the tiles, and no read on any CTA found a wrong word.")
    elif kinds["overwrite"]:
        out.append(f"The producer refilled a stage a consumer had not released "
                   f"{_plural(kinds['overwrite'], 'time')} (overwrite).")
    if kinds["reuse_before_wait"]:
        out.append(f"{_plural(kinds['reuse_before_wait'], 'arrive')} came in a phase that no "
                   "wait had observed yet (reuse_before_wait): the barrier ran ahead of its "
                   "waiters.")
    if kinds["tx_mismatch"]:
        text = "The announced bytes differ from the bytes the copies bring (tx_mismatch)"
        if held:
            text += ("; the phase never completed on the GPU, which the engine explains only by "
                     f"applying landed bytes together so the count steps over zero "
                     f"({_plural(held, 'landing')} held)")
        elif doc["status"] == "deadlock":
            text += ": the phase waits for bytes that never come"
        out.append(text + ".")
    if kinds["proxy_fence_missing"]:
        stored = [o for o in source["observed"] if o["agent"] is None]
        same = all(o["agrees"] for o in stored)
        out.append(f"All {_plural(kinds['proxy_fence_missing'], 'store')} read shared memory "
                   "that threads wrote with no fence.proxy.async (proxy_fence_missing)"
                   + (", yet every tile CTA 0 stored came out as the engine's stores wrote "
                      "it: the race is real and rarely lost, which is why the fence is easy to "
                      "forget." if same and stored else "."))
    if kinds["ordering_race"]:
        out.append(f"The engine names {_plural(kinds['ordering_race'], 'read')} of data "
                   "that no wait had ordered after its writer (ordering_race): the wait that "
                   "returned did not observe the release that makes the bytes visible.")
    if kinds["remote_after_exit"]:
        out.append(f"{_plural(kinds['remote_after_exit'], 'access')} reached a CTA whose "
                   "agents had all finished (remote_after_exit): on the H200 a remote arrive "
                   "into a CTA that has exited never completes, and the kernel hangs "
                   "(traces/probes.json).")
    elif "no_producer_tail" in bugs and source["conformance"]["status"]["gpu"] == "done":
        margin = _exit_margin_ns(doc)
        out.append("No remote arrive met an exited CTA on this run: each CTA's last line ran "
                   + (f"at least {margin:,} ns " if margin is not None else "")
                   + "after the peer's last remote arrive into it, because the two consumers "
                   "finish together, and nothing but that timing orders a CTA's exit after "
                   "its peer's last arrive. Had one come later, the H200 would never have "
                   "completed it and the kernel would have hung (traces/probes.json, "
                   "remote_after_exit); the checker finds that schedule.")
    if kinds["deadlock"] and doc["status"] == "deadlock":
        where = "the GPU's wait gave up" if _gave_up(source) else "the GPU hung"
        out.append(f"The engine blocks where {where}: no agent can move (deadlock).")
    if "wrong_arrival_count" in bugs:
        out.append("Notice the empty_barrier tokens: each consumer's arrive finds one arrival "
                   "pending, so each completes a phase on its own and one tile's releases move "
                   "the barrier two phases.")
    if "forget_phase_toggle" in bugs and doc["status"] == "deadlock" and not kinds["stale_wait"]:
        out.append("No wait returned early here: by the time the consumer came back to a stage "
                   "the barrier had moved on to a new phase of parity 0, which nobody will "
                   "complete, so the same bug that reads stale data with one stage hangs.")
    if source["conformance"]["status"]["gpu"] == "hardware_trap":
        out.append("Hopper traps on an arrive that finds no arrival pending (a second "
                   "arrive.expect_tx in one phase), and a trap in any CTA ends them all.")
    for note in source["conformance"]["notes"]:
        if "trapped" in note:
            out.append(f"The replay's note: {note}.")
    reordered = source["conformance"]["reordered"]
    if reordered:
        out.append(f"{_plural(reordered, 'record')} logged within 1,000 cycles of another "
                   f"warp's {'was' if reordered == 1 else 'were'} taken in the order the "
                   "tokens and wait results prove.")
    return out


def _exit_margin_ns(doc: dict) -> int | None:
    """How long before each CTA's last line the peer's last remote arrive into it ran (the
    smallest over the CTAs), from the steps' GPU times; None without remote arrives."""
    cta_of = {a["name"]: a.get("cta", 0) for a in doc["layout"].get("agents", [])}
    last: dict[int, int] = {}
    remote: dict[int, int] = {}
    for step in doc["steps"]:
        cta = cta_of.get(step["agent"])
        if cta is None or step.get("time_ns") is None:
            continue
        last[cta] = step["time_ns"]
        op = step.get("op") or ""
        target = str((step.get("operands") or {}).get("barrier", ""))
        if "arrive" in op and "shared::cluster" in op and target.startswith("cta"):
            peer = int(target[3:target.index(".")])
            if peer != cta:
                remote[peer] = step["time_ns"]
    margins = [last[c] - t for c, t in remote.items() if c in last]
    return min(margins) if margins else None


def _launch(doc: dict) -> str:
    ctas = doc["source"]["ctas"]
    if ctas["launched"] <= 1:
        return ""
    o = ctas["outcomes"]
    parts = [f"{o['finished']} finished"]
    if o["timed_out"]:
        parts.append(f"{o['timed_out']} had a wait give up")
    if o["operand_error"]:
        parts.append(f"{o['operand_error']} stopped on an operand error")
    if o["not_reported"]:
        why = ("the host ended the hung launch"
               if (doc["source"].get("error") or {}).get("name") == "launch_hung"
               else "the trap ended them")
        parts.append(f"{o['not_reported']} never reported ({why})")
    cluster = (doc["source"].get("launch") or {}).get("cluster", 1)
    units = f" ({ctas['launched'] // cluster} clusters of {cluster})" if cluster > 1 else ""
    text = f"Over all {ctas['launched']} CTAs{units}: {', '.join(parts)}; "
    text += (f"{ctas['reads_wrong']:,} reads found wrong words in "
             f"{_plural(ctas['ctas_with_wrong_reads'], 'CTA')}" if ctas["reads_wrong"]
             else "no read found a wrong word")
    for name, s in ctas["stored"].items():
        if s.get("elements"):
            text += f"; {s['changed']:,} of {s['elements']:,} elements of {name} were written"
    return text + "."


def _verdict(doc: dict, difference: str | None) -> str:
    c = doc["source"]["conformance"]
    if c["matches"]:
        extra = [_plural(c["landings_inferred"], "landing") + " inferred"]
        if c["landings_held"]:
            extra.append(f"{c['landings_held']} held")
        if c["reordered"]:
            extra.append(f"{c['reordered']} reordered")
        return (f"Replayed in the GPU's order, the engine explains all "
                f"{_plural(c['observations_checked'], 'observation')} ({', '.join(extra)}).")
    first = c["first_divergence"]
    return (f"Replayed in the GPU's order, the engine disagrees at step {first['step']}: "
            f"{first['why']}. {difference or ''}").rstrip()


def lesson(doc: dict, difference: str | None = None) -> str:
    """One paragraph for a replay document that carries `source.ctas` and `source.pipeline`;
    `difference` is the sentence that explains a replay whose conformance does not match."""
    parts = [describe(doc) + ".", *_bug_sentences(doc), _outcome(doc), *_notices(doc),
             _launch(doc), _verdict(doc, difference)]
    return " ".join(p for p in parts if p)
