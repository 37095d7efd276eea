"""Generated modules do not leak (issue 13): ``to_module`` registers its source in ``sys.modules`` and
``linecache`` only while the generated class lives, so a long search does not grow them; meanwhile tracebacks,
``inspect.getsource``, ``pickle`` and ``torch.compile`` of a model that inlines the operator keep working."""

from __future__ import annotations

import gc
import inspect
import linecache
import pickle
import sys
import traceback

import torch

from syno_automl import OperatorSpace, known


def _space() -> OperatorSpace:
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "s=2: 2"], [{"N": 2, "C_in": 4, "C_out": 4, "H": 6, "W": 6}], max_depth=8)


def _generated() -> tuple[int, int]:
    return (sum(name.startswith("syno_generated_") for name in sys.modules),
            sum(name.startswith("<syno_automl.codegen.torch:") for name in linecache.cache))


def test_to_module_does_not_grow_sys_modules_or_linecache():
    op = known.conv2d(_space())
    op.to_module(0)
    gc.collect()
    before = _generated()
    for _ in range(200):
        module = op.to_module(0)
        module(torch.randn(2, 4, 6, 6))
    del module
    gc.collect()
    after = _generated()
    assert after[0] <= before[0] + 1 and after[1] <= before[1] + 1, (before, after)


def test_live_modules_keep_source_pickle_and_tracebacks():
    op = known.conv2d(_space())
    module = op.to_module(0)
    count = _generated()
    assert "def forward(self, x):" in inspect.getsource(module.forward)
    again = pickle.loads(pickle.dumps(module))
    x = torch.randn(2, 4, 6, 6)
    torch.testing.assert_close(again(x), module(x))
    try:
        module(torch.randn(2, 5, 6, 6))  # wrong channel count: fails inside the generated forward
    except RuntimeError as e:
        text = "".join(traceback.format_exception(e))
        assert "<syno_automl.codegen.torch:" in text and "t = " in text  # the generated line is shown
    else:
        raise AssertionError("a wrong input shape must fail")
    del again
    gc.collect()
    assert _generated() == count  # the class lives on through `module`: its entries stay


def test_torch_compile_inlines_the_operator_in_a_bigger_model():
    """torch.compile resolves the inlined forward's globals through its module in sys.modules."""
    op = known.conv2d(_space())
    model = torch.nn.Sequential(torch.nn.ReLU(), op.to_module(0), torch.nn.ReLU())
    x = torch.randn(2, 4, 6, 6)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
