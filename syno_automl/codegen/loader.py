"""Load generated Python source as a class whose bookkeeping lives exactly as long as the class.

Two registrations make generated code behave like ordinary code: the text in ``linecache`` (tracebacks,
``inspect.getsource`` of its methods, torch.compile's messages show the generated lines) and a module in
``sys.modules`` (torch.compile resolves the globals ``torch`` / ``F`` of a ``forward`` it inlines into a bigger
model by importing the function's ``__module__``). Both used to stay forever: a long search building thousands
of operators grew them without bound. Now the module does not hold the class (a PEP 562 ``__getattr__`` hands
it out through a weak reference, so ``pickle`` still finds it), and a ``weakref.finalize`` on the class removes
both entries when the class is collected (after its last instance).
"""

from __future__ import annotations

import itertools
import linecache
import sys
import types
import weakref

__all__ = ["load_class"]

_ids = itertools.count(1)


def _forget(module_name: str, filename: str) -> None:
    sys.modules.pop(module_name, None)
    linecache.cache.pop(filename, None)


def load_class(source: str, class_name: str, prefix: str = "syno_generated") -> type:
    """Execute ``source`` as a fresh module and return its class ``class_name``."""
    n = next(_ids)
    filename = f"<syno_automl.codegen.torch:{class_name}:{n}>"
    module_name = f"{prefix}_{n}"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
        cls = module.__dict__.pop(class_name)
    except BaseException:
        _forget(module_name, filename)
        raise
    ref = weakref.ref(cls)

    def __getattr__(name: str):  # noqa: N807 - PEP 562 module attribute hook
        found = ref() if name == class_name else None
        if found is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return found

    module.__dict__["__getattr__"] = __getattr__  # into its namespace, as setting the attribute does
    weakref.finalize(cls, _forget, module_name, filename)
    return cls
