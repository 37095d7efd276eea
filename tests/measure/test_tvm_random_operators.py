"""TVM kernels (llvm) agree with the PyTorch modules on 100+ sampled operators across several specs.

What is checked is the lowering (kernel IR -> TE -> TIR): the kernels are compiled by LLVM without optimization
(``opt-level`` 0), which computes the same values (and the same TIR, the same calls) 13x faster here (110
kernels: ~0.35 s each at -O3, most of it LLVM's optimizer). The default target's -O3 build is checked on the
hand-written programs of tests/codegen/test_codegen_tvm.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from syno_automl import OperatorSpace

pytestmark = pytest.mark.tvm
TARGET = '{"kind": "llvm", "opt-level": 0}'  # to_tvm's JSON form of a target: LLVM's optimizer off (docstring)

SPECS = [
    ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2", "s=2: 2"],
     {"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}, {}, 40),
    ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["s=2: 2"],
     {"N": 3, "C_in": 8, "C_out": 4}, {"max_depth": 5}, 30),
    ("[N, C, L]", "[N, C, L]", ["N: 0", "C: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
     {"N": 2, "C": 4, "L": 12}, {}, 30),
    ("[N, C, H, W]", "[N, C, s^-1*H, s^-1*W]", ["N: 0", "C: 2", "H: 2", "W: 2"], ["s=2: 2"],
     {"N": 2, "C": 4, "H": 8, "W": 8}, {"min_weights": 0, "max_depth": 6}, 10),
]


@pytest.mark.parametrize("spec", SPECS, ids=["conv2d", "matmul", "1d", "pooling"])
def test_tvm_kernel_equals_torch_module(spec) -> None:
    inp, out, primary, coefficients, mapping, options, count = spec
    options = {"max_depth": 7, **options}
    space = OperatorSpace(inp, out, primary, coefficients, [mapping], **options)
    ops = space.sample(count, seed=21)
    assert len(ops) == count
    rng = np.random.default_rng(0)
    for op in ops:
        module = op.to_module().double()
        x = rng.standard_normal(op.program()["input"]["shape"])
        weights = [p.detach().numpy() for p in module.parameters()]
        expected = module(torch.from_numpy(x)).detach().numpy()
        kernel = op.to_tvm(target=TARGET)
        got = kernel(x.astype(np.float32), *[w.astype(np.float32) for w in weights])
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * (1 + np.abs(expected).max()),
                                   err_msg=f"operator {op.hash}:\n{op}")
