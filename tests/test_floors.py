"""The package's floors (docs/architecture.md §5): a module imports only from its own floor or the floors below,
imports inside functions included, so that the wings never loop back into each other."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "syno_automl"
FLOORS = [  # bottom up; a module's floor is that of its longest matching prefix
    ("errors", "echo", "words", "data_check", "vocabulary", "runtime", "cost_profile", "profiles", "settings",
     "config", "interrupt", "_native"),
    ("options", "optuna_private", "space", "known", "ir", "codegen", "measure", "placeholder", "export", "tracking",
     "speed", "kernels", "calibrate", "priors", "classify"),
    ("search",),
    ("tasks",),
    ("study",),
    ("report", "cli", "__main__"),
]
# imports that run up a floor, each with its reason (the budget: at most two)
ALLOWED_UP: set[tuple[str, str]] = set()


def _floor(module: str) -> int:
    parts = module.split(".")[1:] or ["__init__"]
    for i, names in enumerate(FLOORS):
        if parts[0] in names:
            return i
    raise AssertionError(f"{module} has no floor in tests/test_floors.py: add it to FLOORS")


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (type hints only: never run)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return found


def _imports(path: Path) -> set[str]:
    out = set()
    tree = ast.parse(path.read_text())
    skip = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("syno_automl"):
            if node.module == "syno_automl":   # a submodule, or a name of the package's face
                out.update(f"syno_automl.{a.name}" if (PACKAGE / a.name).exists() or
                           (PACKAGE / f"{a.name}.py").exists() else "syno_automl" for a in node.names)
            else:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("syno_automl"))
    return out


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        mods[name] = path
    return mods


def test_every_import_runs_down_the_floors():
    upward = []
    for name, path in _modules().items():
        if name == "syno_automl":   # the package's face re-exports from every floor, lazily
            continue
        for target in _imports(path):
            if target == "syno_automl" or target.split(".")[1] in ("__init__",):
                continue
            if _floor(target) > _floor(name) and (name, target) not in ALLOWED_UP:
                upward.append(f"{name} -> {target}")
    assert not upward, "imports running up a floor:\n" + "\n".join(sorted(upward))
    assert len(ALLOWED_UP) <= 2


def test_no_import_circle_among_modules():
    mods = _modules()
    graph = {n: {t for t in _imports(p) if t in mods and t != n} for n, p in mods.items()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if nxt == "syno_automl" or node == "syno_automl":
                continue
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for n in graph:
        if n not in state:
            visit(n, [n])
