"""The code an operator runs on a target, as text files to log beside it.

``kernel_sources(op, target)`` returns ``{file name: text}``, named by target, for MLflow's artifact view:

* ``<device>.eager``: the standalone PyTorch module that eager execution runs (``operator.py``);
* ``<device>.compiled``: what ``torch.compile`` (Inductor) generates for one forward call of that module on the
  device (``inductor_<k>.py``: the wrapper and its Triton / C++ kernels);
* ``tvm.<kind>`` (``tvm.llvm``, ``tvm.cuda``): the TVMScript of the kernel (``tvmscript.py``) and the source TVM
  emits for it (``source.ll`` for LLVM, ``source.cu`` for CUDA), when TVM is installed.

Example:
    >>> from syno_automl.kernels import kernel_sources
    >>> files = kernel_sources(op, "cpu.eager")          # doctest: +SKIP
    >>> sorted(files)                                     # doctest: +SKIP
    ['cpu.eager/operator.py']
"""
from __future__ import annotations

from typing import Any

from syno_automl.errors import OptionError
from syno_automl.runtime.device import why_not_runnable
from syno_automl.runtime.target import KERNEL_TARGETS, parse_target
from syno_automl.space import Operator

__all__ = ["kernel_sources", "KERNEL_TARGETS"]


def kernel_sources(op: Operator, target: str, mapping: Any = 0) -> dict[str, str]:
    """``{"<target>/<file>": text}`` of the code ``op`` runs on ``target`` at one mapping (index or valuation).

    Raises:
        OptionError: an unknown target, or a CUDA target without a CUDA device.
    """
    if target not in KERNEL_TARGETS:
        raise OptionError(f"kernel_sources: unknown target {target!r} (one of {', '.join(KERNEL_TARGETS)})")
    parsed = parse_target(target, KERNEL_TARGETS)
    kind, execution = parsed.device, parsed.execution
    if kind == "tvm":
        return _tvm_sources(op, execution, mapping)
    why = why_not_runnable(parsed)
    if why is not None:
        raise OptionError(f"kernel_sources: target {target} needs a CUDA device: {why}")
    if execution == "eager":
        return {f"{target}/operator.py": op.to_source(mapping)}
    return {f"{target}/inductor_{k}.py": code for k, code in enumerate(_inductor_code(op, mapping, kind))}


def _inductor_code(op: Operator, mapping: Any, device: str) -> list[str]:
    import torch
    from torch._inductor.utils import run_and_get_code  # Inductor's own test helper: the generated modules' text

    module = op.to_module(mapping).to(device)
    x = torch.randn(*op.program(mapping)["input"]["shape"], device=device)
    torch._dynamo.reset()  # a fresh compilation, so that its code is what we capture
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(module), x)
    return list(codes)


def _tvm_sources(op: Operator, kind: str, mapping: Any) -> dict[str, str]:
    import tvm

    from syno_automl.codegen.tvm import default_gpu_schedule, make_target, program_to_irmodule

    target = make_target(kind)
    mod = program_to_irmodule(op.program(mapping))
    files = {f"tvm.{kind}/tvmscript.py": mod.script()}
    if kind == "cuda":
        mod = default_gpu_schedule(mod, target)
    exe = tvm.compile(mod, target=target)
    runtime = exe.mod
    sources = [runtime.inspect_source()] + [m.inspect_source() for m in runtime.imports]
    text = "\n".join(s for s in sources if s)
    if text:
        files[f"tvm.{kind}/source.{'cu' if kind == 'cuda' else 'll'}"] = text
    return files
