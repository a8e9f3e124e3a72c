"""Every module under benchmarks/ is reachable: a script (a ``__main__`` block) runs as ``memlane
bench NAME``, a library is imported by another benchmark, the CLI or a test. A new script that
is in neither list of benchmarks/__init__.py fails here."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from benchmarks import LIBRARIES, SCRIPTS, command_name
from cluster.cli import app

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _modules() -> set[str]:
    return {p.stem for p in BENCHMARKS.glob("*.py")} - {"__init__"}


def _has_main_block(module: str) -> bool:
    tree = ast.parse((BENCHMARKS / f"{module}.py").read_text())
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def _bench_commands() -> set[str]:
    group = typer.main.get_command(app).commands["bench"]  # type: ignore[attr-defined]
    return set(group.commands)


def test_every_module_is_a_listed_script_or_library():
    modules = _modules()
    assert not set(SCRIPTS) & set(LIBRARIES)
    assert modules - set(SCRIPTS) - set(LIBRARIES) == set(), "add it to SCRIPTS or LIBRARIES"
    assert (set(SCRIPTS) | set(LIBRARIES)) - modules == set(), "listed but not under benchmarks/"
    assert [m for m in SCRIPTS if not _has_main_block(m)] == []
    assert [m for m in LIBRARIES if _has_main_block(m)] == []


def test_every_script_is_a_bench_command_and_nothing_else_is():
    names = [command_name(m) for m in SCRIPTS]
    assert len(set(names)) == len(names)
    assert _bench_commands() == {"engine", "suite", *names}


def test_every_library_is_imported_by_another_module():
    files = [p for d in ("benchmarks", "cluster", "tests") for p in (ROOT / d).rglob("*.py")]
    imports = {p: _imported(p) for p in files}
    unused = [
        m
        for m in LIBRARIES
        if not any(f"benchmarks.{m}" in names for p, names in imports.items() if p.stem != m)
    ]
    assert unused == []


# A module a test imported earlier makes runpy warn before running it again as __main__.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("module", sorted(SCRIPTS))
def test_bench_name_help_is_the_scripts_own(module):
    name = command_name(module)
    result = CliRunner().invoke(app, ["bench", name, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"usage: memlane bench {name} ")


def test_bench_runs_the_script_with_its_arguments(tmp_path):
    log = tmp_path / "questions.jsonl"
    row = {
        "category": "multi",
        "evidence_turns": ["D1:1", "D2:3"],
        "top_turns": {"piled": ["D1:1", "D1:2", "D1:3", "D2:1"], "spread": ["D1:1", "D2:3"]},
    }
    log.write_text(json.dumps(row) + "\n")
    result = CliRunner().invoke(app, ["bench", "session-coverage", str(log), "--k", "3"])
    assert result.exit_code == 0, result.output
    # k=3: "piled" shows one session (D1 three times) and misses D2; "spread" covers both.
    assert "| piled | multi | 1 | 1.00 | 2.00 | 1.000 |" in result.output
    assert "| spread | multi | 1 | 2.00 | 2.00 | 0.000 |" in result.output
    # The default k=10 reaches D2:1: the script saw --k.
    default = CliRunner().invoke(app, ["bench", "session-coverage", str(log)])
    assert "| piled | multi | 1 | 2.00 | 2.00 | 0.000 |" in default.output


def test_bench_script_bad_arguments_exit_2_naming_the_problem(tmp_path):
    result = CliRunner().invoke(app, ["bench", "session-coverage", str(tmp_path / "q.jsonl"), "--k", "x"])
    assert result.exit_code == 2
    assert "argument --k: invalid int value: 'x'" in result.output
