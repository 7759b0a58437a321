"""Errors are written for the person who typed the pipeline: the line, a caret under the column,
what was expected in words, and a hint. The messages are tested as output."""

from __future__ import annotations

import pytest

from app.lang.compiler import instantiate, load, resolve_params
from app.lang.errors import ParamError, PipelineError
from app.scenarios import get

RING = get("double_buffer_tma").source


def compile_text(text: str, bugs=()):
    pipeline = load(text, frozenset(bugs))
    return instantiate(pipeline, tuple(sorted(resolve_params(pipeline, {}).items())))


def error_of(text: str) -> PipelineError:
    with pytest.raises(PipelineError) as info:
        compile_text(text)
    return info.value


def test_a_missing_semicolon_is_reported_at_the_end_of_its_line():
    text = RING.replace("++pipe_state;\n    }\n}\n\nagent consumer", "++pipe_state\n    }\n}\n\n"
                                                                    "agent consumer", 1)
    err = error_of(text)
    line = text.splitlines()[err.line - 1]
    assert line.strip() == "++pipe_state"
    assert err.render(text).splitlines() == [
        f"{err.line}:{err.column}: a `;` is missing at the end of this line",
        f"{err.line} | {line}",
        " " * (len(f"{err.line} | ") + len(line)) + "^",
        "hint: every declaration and instruction ends with `;`",
    ]


def test_an_undeclared_barrier_names_the_closest_one():
    text = RING.replace("[full_barrier[pipe_state.index]];", "[ful_barrier[pipe_state.index]];")
    err = error_of(text)
    assert err.message == "`ful_barrier` is not declared here"
    assert err.hint == "did you mean `full_barrier`?"
    assert text.splitlines()[err.line - 1][err.column - 1:].startswith("ful_barrier")


def test_an_unknown_instruction_names_the_closest_one():
    text = RING.replace("cp.async.bulk.commit_group;", "cp.async.bulk.comit_group;")
    err = error_of(text)
    assert "`cp.async.bulk.comit_group` is not an instruction the engine knows" == err.message
    assert err.hint == "did you mean `cp.async.bulk.commit_group`?"
    assert text.splitlines()[err.line - 1][err.column - 1:].startswith("comit_group;")


def test_try_wait_without_parity_gets_a_hint():
    text = RING.replace("consumer_wait(pipe_state);",
                        "mbarrier.try_wait.shared::cta.b64 _, [full_barrier[0]], 0;")
    err = error_of(text)
    assert err.message == "expected the state register an arrive wrote"
    assert err.hint == "a number is a phase parity: did you mean `mbarrier.try_wait.parity`?"
    text = RING.replace("consumer_wait(pipe_state);",
                        "mbarrier.try_wait.shared::cta.b64 _, [full_barrier[0]], [x];")
    assert error_of(text).hint == "the form is `mbarrier.try_wait.shared::cta.b64 " \
                                  "{waitComplete,} [barrier], state {, suspendTimeHint};`"


def test_operand_of_the_wrong_kind_names_the_form():
    err = error_of(RING.replace("[tile[k]], tile_bytes, [full_barrier",
                                "[full_barrier[0]], tile_bytes, [full_barrier"))
    assert err.message == "`full_barrier` is a barrier; this operand is a tensor"
    assert err.hint.startswith("the form is `cp.async.bulk.shared::cluster.global")


def test_helper_errors_point_at_the_call():
    err = error_of(RING.replace("consumer_release(pipe_state);", "consumer_release(k);"))
    assert err.message.startswith("in `consumer_release(...)`: ")
    assert "consumer_release(k);" in RING.replace(
        "consumer_release(pipe_state);", "consumer_release(k);").splitlines()[err.line - 1]


def test_a_patch_must_find_its_text_exactly_once():
    text = RING + '\nbug twice "x" { replace "++pipe_state;" with "x"; }\n'
    compile_text(text)  # the pipeline runs; choosing the broken toggle is the error
    toggle = next(t for t in load(text).toggles() if t["name"] == "twice")
    assert toggle["error"]["message"].startswith("bug `twice`: '++pipe_state;' occurs 2 times")
    with pytest.raises(PipelineError) as info:
        compile_text(text, ["twice"])
    assert info.value.hint.startswith("make the text longer, or scope it")


def test_a_bad_parameter_default_and_sizes_past_the_limits():
    assert "outside 1..16" in error_of(
        RING.replace("param stages      = 2 ", "param stages      = 20 ")).message
    with pytest.raises(ParamError) as info:
        pipeline = load(RING)
        values = resolve_params(pipeline, {"tile_bytes": 8192, "chunk_bytes": 16})
        instantiate(pipeline, tuple(sorted(values.items())))
    assert info.value.field == "chunk_bytes" and "at most 256 chunks" in info.value.message
    text = RING.replace("agent consumer[consumers]", "agent consumer[consumers * 8]")
    err = error_of(text.replace("in 1..4 ", "in 1..4 ").replace("consumers   = 1 ",
                                                               "consumers   = 4 "))
    assert err.limit == "agents" and "1 to 16 agents" in err.message


def test_a_loop_without_an_instruction_is_refused():
    text = RING.replace("++pipe_state;\n    }\n}\n\nagent consumer",
                        "++pipe_state;\n        while (1) { k += 0; k -= 0; }\n    }\n}\n\n"
                        "agent consumer", 1)
    compile_text(text)  # register lines are steps: this loop spins but is a program
    text = RING.replace("for (int k = 0; k < tiles; ++k) {\n        producer_acquire",
                        "while (1) { }\n    for (int k = 0; k < tiles; ++k) {\n        "
                        "producer_acquire", 1)
    assert error_of(text).message == "a loop needs at least one instruction in its body"


def test_source_over_64_kib_is_refused_before_parsing():
    err = error_of("// " + "x" * 70_000)
    assert err.limit == "source"


@pytest.mark.parametrize("scenario_id", ["single_barrier", "double_buffer_tma",
                                         "cluster_multicast", "kloop_tma_mma",
                                         "proxy_fence_store"])
def test_a_syntax_error_on_any_line_is_reported_on_that_line(scenario_id):
    lines = get(scenario_id).source.splitlines()
    checked = 0
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.strip().startswith("//"):
            continue
        broken = "\n".join(lines[:n - 1] + ["@" + line] + lines[n:])
        err = error_of(broken)
        assert (err.line, err.column) == (n, 1), (n, err.message)
        assert err.message == "unexpected character `@`"
        checked += 1
    assert checked > 10


def test_the_api_names_the_line_of_a_syntax_error():
    from fastapi.testclient import TestClient

    from app.main import create_app

    text = RING.replace("cp.async.bulk.commit_group;", "cp.async.bulk.commit_group")
    with TestClient(create_app()) as client:
        response = client.post("/api/v1/pipelines/validate", json={"source": text})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "source"]
    line = text.splitlines()[detail["line"] - 1]
    assert line.strip() == "cp.async.bulk.commit_group"
    assert detail["msg"] == "a `;` is missing at the end of this line"


def test_unnamed_literals_of_the_grammar_are_spelled_as_written():
    err = error_of(RING.replace("agent producer {", "agent producer {\n    u64 tok;"))
    assert "__ANON" not in err.message and "`++`" in err.message
    # and exactly what fits there, not LALR's merged lookahead (`;`, `in`, a string...)
    err = error_of(RING.replace("in 1..16", "in 1 16"))
    assert err.message == "unexpected `16`: expected `..`"
