"""The engine stays pure: app/sim imports only the standard library and itself, and its layers
point one way (no import circle, function-level imports included)."""

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
    files = sorted(SIM.rglob("*.py"))
    assert files
    for path in files:
        for module, level in imported_modules(path):
            top = module.split(".")[0]
            if level > 0 or module.startswith("app.sim") or top == "__future__":
                continue
            if top not in allowed:
                offenders.append(f"{path.relative_to(SIM)}: {module}")
    assert offenders == []


def test_the_check_itself_flags_a_web_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import fastapi\nfrom pydantic import BaseModel\nimport asyncio\n")
    modules = {m for m, _ in imported_modules(bad)}
    allowed = set(sys.stdlib_module_names) - {"asyncio"}
    assert {m for m in modules if m.split(".")[0] not in allowed} == {"fastapi", "pydantic",
                                                                      "asyncio"}


def _module_name(path: Path) -> str:
    parts = ["app", "sim", *path.relative_to(SIM).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every app.sim module -> the app.sim modules it imports (relative imports resolved;
    `from . import x` names module x where x is one)."""
    modules = {_module_name(p): p for p in SIM.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_app_sim_has_no_import_cycle():
    graph = import_graph()
    assert "app.sim.families.copies" in graph["app.sim.machine"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_families_use_the_shared_services_not_the_machine():
    """A family may use core, ordering, detectors and another family; never the machine, the
    trace or the snapshot (they are built on the families)."""
    graph = import_graph()
    above = {"app.sim.machine", "app.sim.trace", "app.sim.schedule", "app.sim.snapshot"}
    for name, targets in graph.items():
        if name.startswith("app.sim.families.") or name in ("app.sim.core", "app.sim.family"):
            assert not targets & above, (name, targets & above)


def test_the_command_line_starts_without_the_web_stack():
    """`mbarrier-inspector check|trace|validate` import neither FastAPI nor pydantic (about a
    second of a check's answer on a small machine): only `serve` needs them."""
    import subprocess

    probe = ("import sys, app.cli, app.check.cli, app.check.promela_cli; "
             "print(sorted(m for m in ('fastapi', 'pydantic', 'starlette') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300, check=True, cwd=SIM.parent.parent)
    assert out.stdout.strip() == "[]"
