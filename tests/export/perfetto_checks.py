"""What every Perfetto export must satisfy, shared by the conversion, API and CLI tests."""

from __future__ import annotations

from collections import defaultdict

import jsonschema

from app.export.perfetto import ENGINE_TITLES, trace_event_schema

VALIDATOR = jsonschema.Draft202012Validator(trace_event_schema())


def schema_errors(chrome: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in VALIDATOR.iter_errors(chrome)]


def step_events(chrome: dict) -> list[dict]:
    return [e for e in chrome["traceEvents"] if e.get("cat") == "step"]


def thread_names(chrome: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in chrome["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def check_export(doc: dict, chrome: dict) -> None:
    """Valid against the format's schema; each step of the window once, on its mover's track;
    slices on one track nest; each diagnostic of the window an instant event."""
    assert schema_errors(chrome) == []
    numbers = [e["args"]["step"] for e in step_events(chrome)]
    assert sorted(numbers) == [s["step"] for s in doc["steps"]]
    assert len(numbers) == len(set(numbers))

    names = thread_names(chrome)
    by_number = {s["step"]: s for s in doc["steps"]}
    for event in step_events(chrome):
        agent = by_number[event["args"]["step"]]["agent"]
        assert names[event["tid"]] == ENGINE_TITLES.get(agent, agent)
        assert event["name"] == by_number[event["args"]["step"]]["op"]

    tracks: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for event in chrome["traceEvents"]:
        if event["ph"] == "X":
            assert event["tid"] in names, event
            tracks[event["tid"]].append((event["ts"], event["ts"] + event["dur"]))
    for tid, spans in tracks.items():
        spans.sort(key=lambda span: (span[0], -span[1]))
        open_ends: list[float] = []
        for begin, end in spans:
            while open_ends and open_ends[-1] <= begin + 1e-9:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-9, \
                f"{names[tid]}: [{begin}, {end}] overlaps a slice ending at {open_ends[-1]}"
            open_ends.append(end)

    window = doc["window"]
    expected = sorted((d["kind"], d["step"]) for d in doc["diagnostics"]
                      if window["from"] - 1 <= d["step"] <= window["to"])
    got = sorted((e["name"], e["args"]["step"]) for e in chrome["traceEvents"]
                 if e["ph"] == "i")
    assert got == expected
