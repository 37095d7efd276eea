"""The code an operator runs on each target, as named text files (syno_automl.kernels, issue 24 part 4)."""
from __future__ import annotations

import pytest
import torch

from syno_automl import OperatorSpace
from syno_automl.errors import OptionError
from syno_automl.kernels import kernel_sources


@pytest.fixture(scope="module")
def op():
    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2"], [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=6, threads=1)
    return space.sample(1, seed=0)[0]


def test_eager_is_the_generated_module(op):
    assert kernel_sources(op, "cpu.eager") == {"cpu.eager/operator.py": op.to_source(0)}


def test_unknown_and_unavailable_targets_are_refused(op):
    with pytest.raises(OptionError, match="unknown target"):
        kernel_sources(op, "tpu.eager")
    if not torch.cuda.is_available():
        with pytest.raises(OptionError, match="CUDA"):
            kernel_sources(op, "cuda.compiled")


@pytest.mark.tvm
def test_tvm_gives_its_script_and_source(op):
    pytest.importorskip("tvm")
    files = kernel_sources(op, "tvm.llvm")
    assert "@T.prim_func" in files["tvm.llvm/tvmscript.py"] or "prim_func" in files["tvm.llvm/tvmscript.py"]
    assert "define" in files["tvm.llvm/source.ll"]


@pytest.mark.slow
def test_compiled_gives_inductors_code(op):
    files = kernel_sources(op, "cpu.compiled")
    assert files and all(name.startswith("cpu.compiled/inductor_") for name in files)
    assert any("def call(" in text for text in files.values())
