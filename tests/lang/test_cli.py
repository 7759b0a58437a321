"""The command line takes pipeline files wherever it takes a scenario id."""

from __future__ import annotations

import json

from app.cli import main
from app.scenarios import get


def write(tmp_path, text: str, name: str = "my_ring.pipe"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_validate_prints_what_the_file_declares(tmp_path, capsys):
    path = write(tmp_path, get("double_buffer_tma").source)
    assert main(["validate", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: ok (sha256 ")
    assert "param   stages = 2 in 1..16" in out
    assert "agent   consumer0: 7 lines" in out
    assert "bug     expect_tx_short: arrive.expect_tx announces 1,024 bytes fewer" in out


def test_validate_shows_the_error_with_a_caret_and_exits_2(tmp_path, capsys):
    text = get("single_barrier").source.replace("int phase = 0;", "int phase = 0")
    path = write(tmp_path, text)
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{path}:11:18: a `;` is missing at the end of this line"
    assert err[1] == "11 |     int phase = 0"
    assert err[2].index("^") == len("11 |     int phase = 0")


def test_trace_and_check_run_a_file_with_any_parameter(tmp_path, capsys):
    path = write(tmp_path, get("double_buffer_tma").source)
    assert main(["trace", path, "--param", "stages=1", "--tiles", "2", "--no-snapshots"]) == 0
    trace = json.loads(capsys.readouterr().out)
    assert trace["scenario"]["id"] is None
    assert trace["scenario"]["params"]["stages"] == 1 and trace["status"] == "done"
    assert main(["check", path, "--param", "stages=1", "--tiles", "2", "--bugs",
                 "expect_tx_short", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "partial_read" in out and "deadlock" in out and "tx_mismatch" in out
    assert f"replay: mbarrier-inspector trace {path} --stages 1" in out


def test_a_reader_that_leaves_early_gets_no_traceback():
    import subprocess
    import sys
    cmd = (f"{sys.executable} -m app.cli trace double_buffer_tma --param tiles=100 "
           "| head -c 10")  # megabytes: far more than a pipe buffers
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True,
                          timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 141
