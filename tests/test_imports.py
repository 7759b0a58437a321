"""The engine stays pure: app/sim imports only the standard library and itself."""

import ast
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "app" / "sim"


def imported_modules(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def test_app_sim_imports_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) - {"asyncio"}
    offenders = []
    files = sorted(SIM.glob("*.py"))
    assert files
    for path in files:
        for module, level in imported_modules(path):
            top = module.split(".")[0]
            if level > 0 or module.startswith("app.sim") or top == "__future__":
                continue
            if top not in allowed:
                offenders.append(f"{path.name}: {module}")
    assert offenders == []


def test_the_check_itself_flags_a_web_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import fastapi\nfrom pydantic import BaseModel\nimport asyncio\n")
    modules = {m for m, _ in imported_modules(bad)}
    allowed = set(sys.stdlib_module_names) - {"asyncio"}
    assert {m for m in modules if m.split(".")[0] not in allowed} == {"fastapi", "pydantic",
                                                                      "asyncio"}
