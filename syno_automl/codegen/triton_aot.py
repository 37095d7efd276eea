"""Ahead-of-time compilation of a generated Triton kernel for an NVIDIA GPU, on a machine without one.

``compile_kernel(program, arch=90)`` compiles the kernel of ``triton_source(program)`` with one of its autotune
configs for ``GPUTarget("cuda", arch, 32)`` (PTX, then ptxas to a cubin; no GPU, no nvcc) and reports what the
compiled kernel uses: registers and spills (from ``ptxas -v`` on the kernel's PTX: Triton fills ``n_spills`` only
when it loads the cubin on a device), shared memory, and whether the PTX uses Hopper's ``wgmma``.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syno_automl.codegen.loader import load_class
from syno_automl.codegen.triton import triton_source
from syno_automl.codegen.triton_kernel import KERNEL_NAME
from syno_automl.errors import MissingDependencyError, OptionError
from syno_automl.ir import Program, parse

__all__ = ["AotKernel", "compile_kernel", "TRITON_DTYPES"]

TRITON_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class AotKernel:
    arch: int
    dtype: str
    config: dict[str, int]
    registers: int
    spills: int          # bytes of spill stores + loads reported by ptxas
    shared: int          # bytes of shared memory
    wgmma: bool
    cubin_bytes: int


def _ptxas_report(ptx: str, arch: int) -> tuple[int, int]:
    """(registers, spill bytes) of the kernel, from ``ptxas -v`` (Triton's bundled ptxas)."""
    from triton import knobs
    from triton.backends.nvidia.compiler import sm_arch_from_capability

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        run = subprocess.run([knobs.nvidia.ptxas.path, "-v", f"--gpu-name={sm_arch_from_capability(arch)}",
                              str(src), "-o", str(Path(tmp) / "k.o")], capture_output=True, text=True, check=True)
    log = run.stderr + run.stdout
    regs = [int(n) for n in re.findall(r"Used (\d+) registers", log)]
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", log))
    return (max(regs) if regs else 0), spills


@contextlib.contextmanager
def _compiling():
    """Without TRITON_INTERPRET (a test may set it): the kernel jitted and compiled, every config kept."""
    held = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if held is not None:
            os.environ["TRITON_INTERPRET"] = held


def compile_kernel(program: Mapping[str, Any] | Program, arch: int = 90, dtype: str = "bfloat16",
                   config: int = 0) -> AotKernel:
    """Compile ``program``'s kernel for ``sm_<arch>`` with its ``config``-th autotune config and x, w and out
    of ``dtype`` (a torch dtype name); raises OptionError when the program is not supported or the config or
    dtype does not exist."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as e:  # pragma: no cover - triton is in the test extra
        raise MissingDependencyError("compiling a Triton kernel needs triton (pip install triton)") from e
    if dtype not in TRITON_DTYPES:
        raise OptionError(f"dtype {dtype!r} is not one of {', '.join(TRITON_DTYPES)}")
    p = parse(program)
    with _compiling():
        cls = load_class(triton_source(p, class_name="AotKernelModule"), "AotKernelModule")
        tuner = cls.forward.__globals__[KERNEL_NAME]  # type: ignore[attr-defined]  # the generated module
        if not 0 <= config < len(tuner.configs):
            raise OptionError(f"config {config} out of range: the kernel has {len(tuner.configs)}")
        cfg = tuner.configs[config]
        fn = tuner.fn
        ty = TRITON_DTYPES[dtype]
        signature: dict[str, str] = {}
        for name in fn.arg_names:
            signature[name] = f"*{ty}" if name.endswith("_ptr") else \
                "constexpr" if name.isupper() and name != "M" else "i32"
        tl = triton.language
        constexprs = {"PRECISION": "tf32" if ty == "fp32" else "ieee", "ACC": tl.float32, **cfg.kwargs}
        src = ASTSource(fn, signature=signature, constexprs=constexprs)
        compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
    ptx = compiled.asm["ptx"]
    registers, spills = _ptxas_report(ptx, arch)
    return AotKernel(arch, dtype, dict(cfg.kwargs), registers, spills, int(compiled.metadata.shared),
                     "wgmma" in ptx, len(compiled.asm["cubin"]))
