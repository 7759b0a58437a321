"""An internal consistency check that fails (a counterexample that does not replay) is a bug of
the checker, not a verdict: the CLI exits 3 with one line naming the configuration (never a
traceback, never 1, which means unsafe), and `POST /api/v1/check` answers a JSON 500 naming it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.routes import check as check_route
from app.check import service
from app.check.engine import Explorer, Limits
from app.cli import main
from app.main import app
from app.scenarios import get

from . import programs as p


def broken_violation(*args, **kwargs):
    raise AssertionError("the counterexample for overwrite does not replay to it")


def test_the_cli_exits_3_with_one_line_naming_the_configuration(monkeypatch, capsys):
    monkeypatch.setattr(service, "violation", broken_violation)
    status = main(["check", "double_buffer_tma", "--stages", "1", "--tiles", "2",
                   "--consumers", "2", "--bugs", "wrong_arrival_count", "--no-progress"])
    assert status == 3
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "internal error" in line and "does not replay" in line
    assert "double_buffer_tma stages=1 tiles=2" in line and "consumers=2" in line
    assert "bugs=wrong_arrival_count" in line


def test_a_pipeline_text_is_named_by_its_sha256(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(service, "violation", broken_violation)
    path = tmp_path / "spin.pipe"
    path.write_text(p.SPIN)
    assert main(["check", str(path), "--no-progress"]) == 3
    assert "the pipeline sha256:" in capsys.readouterr().err


def test_any_failure_inside_a_check_job_is_an_internal_error(monkeypatch):
    def boom(self, *args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(Explorer, "explore", boom)
    scenario = get("single_barrier")
    with pytest.raises(service.InternalError, match="single_barrier tiles="):
        service.check_job(scenario, scenario.resolve({}, []), Limits())


def test_the_api_answers_a_json_500_naming_it(monkeypatch):
    async def failing(*args, **kwargs):
        raise service.InternalError("internal error while checking double_buffer_tma "
                                    "stages=2: AssertionError: no replay")

    monkeypatch.setattr(check_route.checks, "run", failing)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/api/v1/check", json={"scenario": "double_buffer_tma",
                                                      "params": {"stages": 2, "tiles": 3}})
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"detail": "internal error while checking double_buffer_tma "
                                         "stages=2: AssertionError: no replay"}
