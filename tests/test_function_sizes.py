"""Small functions with one job: none in syno_automl/ is longer than 120 lines or takes more than 10 parameters,
except the public entry points whose signature is the documented contract (README.md, "The space in five lines",
and docs/search.md's library path) and the settings table's rows (one call per setting)."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "syno_automl"
MAX_LINES = 120
MAX_PARAMETERS = 10
LONG_ALLOWED = {"settings.py:_rows": "the settings table: one row per setting"}
MANY_PARAMETERS_ALLOWED = {
    "placeholder/substitution.py:substitute": "substitute(): the documented contract",
    "search/callbacks.py:SynoSubstitution.__init__": "SynoSubstitution: the documented contract",
    "space.py:OperatorSpace.__init__": "OperatorSpace(...): the documented contract",
}


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        rel = path.relative_to(PACKAGE).as_posix()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{rel}:{node.name}", node))
            elif isinstance(node, ast.ClassDef):
                found += [(f"{rel}:{node.name}.{f.name}", f) for f in node.body
                          if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs] + [x for x in (a.vararg, a.kwarg) if x is not None]
    return len([n for n in names if n.arg not in ("self", "cls")])


def test_no_function_is_longer_than_120_lines():
    long = [f"{name}: {node.end_lineno - node.lineno + 1} lines" for name, node in _functions()
            if node.end_lineno - node.lineno + 1 > MAX_LINES and name not in LONG_ALLOWED]
    assert not long, "split these into named steps:\n" + "\n".join(long)


def test_no_function_takes_more_than_10_parameters():
    many = [f"{name}: {_parameters(node)} parameters" for name, node in _functions()
            if _parameters(node) > MAX_PARAMETERS and name not in MANY_PARAMETERS_ALLOWED]
    assert not many, "group the settings that travel together into a record:\n" + "\n".join(many)


def test_the_exceptions_are_still_needed():
    names = {name for name, _ in _functions()}
    assert set(LONG_ALLOWED) <= names and set(MANY_PARAMETERS_ALLOWED) <= names
