"""Every exception the package raises on purpose is a SynoError that keeps the builtin base its callers catch.

An AST scan of syno_automl/ and lightning_modules/ for `raise <builtin exception>(...)` and for exception classes
that do not derive from SynoError. The upper floors (the CLI, settings, study and search wings) are converted by
their owner: they are allowed here, and their remaining count is printed. The classes themselves (the package's
and the space's node errors) are checked directly.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
from pathlib import Path

import pytest

from syno_automl import errors

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("syno_automl", "lightning_modules")

#: (the upper floors are converted too: no file is exempt)
UPPER_FLOORS: tuple[str, ...] = ()
#: plain raises that a protocol asks for: (file, builtin, why)
ALLOWED = {
    ("syno_automl/__init__.py", "AttributeError"): "PEP 562 module __getattr__",
    ("syno_automl/codegen/loader.py", "AttributeError"): "PEP 562 module __getattr__",
    ("syno_automl/__init__.py", "ImportError"): "the package cannot load (no compiled core): nothing to import yet",
    ("syno_automl/interrupt.py", "KeyboardInterrupt"): "the user's Ctrl-C, re-raised after cleanup",
    ("syno_automl/cli/app.py", "KeyboardInterrupt"): "the user's stop signal, raised again where an error hid it",
    ("syno_automl/study/run.py", "KeyboardInterrupt"): "the user's stop signal, raised again after the trials",
    ("syno_automl/tasks/base.py", "NotImplementedError"): "the abstract methods each task overrides",
}
_BUILTIN_EXCEPTIONS = {name for name, v in vars(builtins).items()
                       if isinstance(v, type) and issubclass(v, BaseException)}


@functools.cache  # parsed once for both scans
def _sources() -> list[tuple[str, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out.append((path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))))
    return out


def _raised_builtin(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) and exc.id in _BUILTIN_EXCEPTIONS else None


def plain_raises() -> list[tuple[str, int, str]]:
    """(file, line, builtin) of every `raise <builtin>` in the packages."""
    found = []
    for name, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None and (builtin := _raised_builtin(node)):
                found.append((name, node.lineno, builtin))
    return found


def test_lower_floors_raise_only_syno_errors() -> None:
    found = plain_raises()
    upper = [f for f in found if f[0].startswith(UPPER_FLOORS)]
    wrong = [f"{file}:{line}: raise {builtin}" for file, line, builtin in found
             if not file.startswith(UPPER_FLOORS) and (file, builtin) not in ALLOWED]
    print(f"\n{len(upper)} plain raises left in the upper floors:")
    for file, line, builtin in upper:
        print(f"  {file}:{line}: raise {builtin}")
    assert not wrong, "raise a SynoError subclass (syno_automl/errors.py) instead:\n" + "\n".join(wrong)


def test_exception_classes_derive_from_syno_error() -> None:
    """A class the package defines with a builtin exception base also has a SynoError base (by name: the root
    SynoError or one of syno_automl.errors' classes), so `except SynoError` catches it."""
    ours = {name for name, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.SynoError)}
    ours |= {"IRError", "SearchExhaustedError"}  # subclasses defined elsewhere, checked below by import
    from syno_automl import settings

    ours |= {name for name, v in vars(settings).items() if isinstance(v, type) and issubclass(v, errors.SynoError)}
    wrong = []
    for name, tree in _sources():
        if name.startswith(UPPER_FLOORS):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name == "SynoError":
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if any(b.endswith("Warning") for b in bases):  # a warning category, not an error
                continue
            if bases & _BUILTIN_EXCEPTIONS and not bases & ours:
                wrong.append(f"{name}:{node.lineno}: class {node.name}({', '.join(sorted(bases))})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name, builtin", [
    ("MappingIndexError", IndexError), ("NotAChildError", KeyError), ("NotFinalError", ValueError),
    ("ShapeError", ValueError), ("KernelArgumentError", TypeError), ("NoOperatorError", RuntimeError),
    ("WeightsNotFoundError", LookupError), ("OutputPathError", FileNotFoundError),
    ("DatasetNotFoundError", FileNotFoundError), ("DatasetFormatError", ValueError),
    ("MissingDependencyError", ImportError),
])
def test_new_errors_keep_the_builtin_callers_catch(name: str, builtin: type) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, errors.SynoError) and issubclass(cls, builtin) and name in errors.__all__


def test_the_ir_error_is_a_syno_error() -> None:  # lightning_modules' NonFiniteLossError: by the AST scan above
    from syno_automl.ir.errors import IRError

    assert issubclass(IRError, errors.SynoError) and issubclass(IRError, ValueError)


def test_a_missing_dataset_folder_is_a_syno_error_naming_it(tmp_path: Path) -> None:
    # files.py loaded by path: the package's __init__ imports Lightning (seconds), which this check does not need
    spec = importlib.util.spec_from_file_location("_dataset_files", ROOT / "lightning_modules/data/files.py")
    files = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(files)
    missing = tmp_path / "nowhere"
    with pytest.raises(errors.DatasetNotFoundError, match="nowhere") as info:  # MNIST's prepare_data() call
        files.find_dataset_dir(missing, ("", "MNIST/raw"), ["train-images-idx3-ubyte"], "MNIST", gz_ok=True)
    assert isinstance(info.value, FileNotFoundError)


def test_not_a_child_reads_as_a_sentence() -> None:
    error = errors.NotAChildError("'x' is not a child of node 00ff")
    assert str(error) == "'x' is not a child of node 00ff"  # not KeyError's quoted repr


def test_every_package_exception_is_a_syno_error_and_keeps_its_builtin_base() -> None:
    from syno_automl import _native
    from syno_automl.config import StudyExistsError, StudyMismatchError
    from syno_automl.search.callbacks import BudgetExceededError, OperatorBuildError, TrainingTooSlowError
    from syno_automl.search.mcts import SearchExhaustedError

    e = errors
    builtin = {e.SpecError: ValueError, e.OptionError: ValueError, e.OptionTypeError: TypeError,
               e.EmptySpaceError: ValueError, e.OperatorFormatError: ValueError, e.SubstitutionError: ValueError,
               e.ResourceError: RuntimeError, e.InternalError: RuntimeError, StudyExistsError: ValueError,
               StudyMismatchError: ValueError, OperatorBuildError: RuntimeError, BudgetExceededError: ValueError,
               TrainingTooSlowError: TimeoutError, SearchExhaustedError: e.EmptySpaceError}
    for cls, base in builtin.items():
        assert issubclass(cls, e.SynoError) and issubclass(cls, base), cls
    assert _native.SpecError is e.SpecError


def test_node_errors_are_syno_errors() -> None:
    from _syno_helpers import conv_space

    root = conv_space(max_depth=3).root()
    with pytest.raises(errors.NotAChildError, match="^'nope' is not a child of node") as info:
        root.apply("nope")
    assert isinstance(info.value, KeyError)
    with pytest.raises(errors.NotFinalError) as info:
        root.to_operator()
    assert isinstance(info.value, ValueError)
