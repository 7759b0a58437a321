"""`mbarrier-inspector check`: exit status 0 safe, 1 unsafe, 2 inconclusive; progress on stderr."""

from __future__ import annotations

import json

import pytest

from app.cli import main


def test_safe_exits_0(capsys):
    assert main(["check", "double_buffer_tma", "--stages", "2", "--tiles", "3"]) == 0
    out, err = capsys.readouterr()
    assert "safe" in out and "No schedule reaches a diagnostic" in out
    assert "checked" in err and "states" in err


def test_unsafe_exits_1_and_prints_each_kind_with_a_replay_command(capsys):
    status = main(["check", "double_buffer_tma", "--stages", "1", "--tiles", "2",
                   "--consumers", "2", "--bugs", "wrong_arrival_count", "--steps"])
    assert status == 1
    out, _ = capsys.readouterr()
    for kind in ("overwrite", "partial_read", "stale_read", "deadlock"):
        assert f"\n{kind}: " in out
    assert "mbarrier-inspector trace double_buffer_tma --stages 1 --tiles 2" in out
    assert "--schedule manual" in out and "!! overwrite" in out


def test_replay_command_reproduces_the_counterexample(capsys):
    main(["check", "proxy_fence_store", "--tiles", "2", "--bugs", "missing_proxy_fence",
          "--no-progress"])
    out, _ = capsys.readouterr()
    command = next(line for line in out.splitlines() if "replay:" in line)
    argv = command.split("replay: mbarrier-inspector ")[1].split()
    assert main(argv) == 0
    table, _ = capsys.readouterr()
    assert "!! proxy_fence_missing" in table


def test_inconclusive_exits_2(capsys):
    status = main(["check", "double_buffer_tma", "--stages", "4", "--tiles", "8", "--consumers",
                   "4", "--max-states", "2000"])
    assert status == 2
    out, _ = capsys.readouterr()
    assert "inconclusive" in out and "state limit" in out


def test_json_output(capsys):
    assert main(["check", "single_barrier", "--tiles", "2", "--bugs", "expect_tx_long", "--json",
                 "--no-progress"]) == 1
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["verdict"] == "unsafe" and err == ""
    assert [v["kind"] for v in result["violations"]] == ["deadlock", "tx_mismatch"]
    assert result["violations"][0]["trace"]["format"] == "mbarrier-inspector/trace"


def test_no_reduction_gives_the_same_answer(capsys):
    argv = ["check", "double_buffer_tma", "--stages", "1", "--tiles", "2", "--bugs",
            "producer_skips_empty_wait", "--json", "--no-progress"]
    main(argv)
    reduced = json.loads(capsys.readouterr().out)
    main([*argv, "--no-reduction"])
    full = json.loads(capsys.readouterr().out)
    assert full["states_explored"] > reduced["states_explored"]
    assert [(v["kind"], v["steps"]) for v in full["violations"]] == \
        [(v["kind"], v["steps"]) for v in reduced["violations"]]


@pytest.mark.parametrize("argv", [
    ["check", "nope"],
    ["check", "single_barrier", "--stages", "2"],
    ["check", "double_buffer_tma", "--bugs", "missing_mma_commit"],
    ["check", "double_buffer_tma", "--max-states", "0"],
    ["check", "double_buffer_tma", "--timeout", "0"],
])
def test_bad_input_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err
