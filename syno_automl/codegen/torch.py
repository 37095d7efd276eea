"""PyTorch code generator for the kernel IR ("program", docs/architecture.md §2).

``program_to_source`` turns a program (the native dict, or a parsed ``syno_automl.ir.Program``) into the
text of a standalone Python module (it imports only ``torch`` and ``torch.nn.functional``) defining one
``torch.nn.Module``; ``build_module`` executes that text and instantiates the class (so ``to_module`` and
``to_source`` share one code path); ``count_flops`` is the IR's FLOPs count (re-exported).

The program is parsed once (``syno_automl.ir.parse``) and walked once by the IR's step walker with the
generator's table of step handlers (codegen/torch_steps.py; contractions in codegen/torch_contract.py), so
``forward`` is straight-line code. Lowering of each step (``p`` is the position of the dim in the *stored*
tensor):

* ``split``    -> ``t.unflatten(p, (|a|, |b|))`` (``-1`` for a run-time sized dim)
* ``merge``    -> ``t.permute(..)`` (b right after a, only if needed) + ``t.flatten(p, p + 1)``
* ``shift``    -> ``torch.roll(t, -1, p)``: ``out[e] = in[(e + 1) mod n]``
* ``stride``   -> ``t[:, ..., ::s]``: ``out[e] = in[e * s]``
  (``shift`` then ``stride`` by s >= 2 of the rolled dim -> one offset slice ``t[:, ..., 1::s]``, no roll)
* ``unfold``   -> ``F.pad`` (k//2 zeros both sides) + ``t.unfold(p, k, 1)`` + ``movedim`` so the window dim
  sits right after the main dim: ``out[m, w] = in[m + w - k//2]`` (0 outside)
* ``expand``   -> nothing at first: the dim is *virtual* (broadcast, not stored). It stays virtual through
  shift/stride/split and through contractions (left out of T's operand; a virtual dim summed by the
  contraction and not provided by the weight becomes a constant factor). It is materialized (``unsqueeze`` +
  ``expand``, still a view) only when a merge with a stored dim, an unfold or the final output needs it.
* ``reduce``   -> ``t.sum(p)`` / ``t.mean(p)`` (on a virtual dim: ``* n`` / nothing)
* ``contract`` -> one ``torch.bmm`` / ``torch.mm`` over the letter groups B, M, N, K (a broadcast ``*`` when
  nothing is summed), never ``torch.einsum``; unfold (+ unfold) + contract in the conv pattern -> one
  ``F.conv1d`` (``F.conv2d``) on the tensor before the unfolds (no im2col copy). See codegen/torch_contract.py.
* end          -> materialize what is still virtual, ``permute`` to ``output.dims``

``contraction="matmul"`` (``program_to_source`` / ``build_module``; default ``"conv"``) emits every contraction of
T as the mm/bmm above, the unfolds as views before it, never ``F.conv1d``/``F.conv2d``: Inductor realizes a
convolution's input, so nothing fuses into it, while ``max-autotune``'s Triton mm templates can take the views
as a prologue (a weight's views, products of weights included, too). Same values and gradients
(tests/codegen/test_codegen_contraction.py).

Dims in ``free_dims`` may have any size at run time (e.g. the batch dim): the generated code never bakes their
size in, so the module works for any size of them and exports with a dynamic dim.

Weights start uniform with the std of ``syno_automl.ir.weight_stds`` (the operator's output variance equals
the replaced torch layer's at its default init; a conv-equivalent operator starts exactly as ``nn.Conv2d``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from syno_automl.codegen.loader import load_class
from syno_automl.codegen.torch_steps import TorchGen
from syno_automl.echo import shown
from syno_automl.errors import OptionError
from syno_automl.ir import Program, count_flops, parse, walk, weight_order, weight_program, weight_stds

__all__ = ["program_to_source", "build_module", "count_flops", "CONTRACTIONS"]

CONTRACTIONS = ("conv", "matmul")  # how a contraction after unfolds is emitted: one convolution, or mm/bmm


class _MatmulGen(TorchGen):
    """The generator without the convolution patterns: each contraction one mm/bmm after the unfolds' views."""

    PATTERNS = {ops: handler for ops, handler in TorchGen.PATTERNS.items() if ops[-1] != "contract"}

    def weight_lines(self) -> list[str]:
        """TorchGen.weight_lines with this generator for the weights' views too (a product of weights after an
        unfold of one is a contraction as well)."""
        lines: list[str] = []
        for k in weight_order(self.p):
            sub = _MatmulGen(weight_program(self.p, k))
            walk(sub.p, sub)
            lines += [f"# w{k} viewed before its contraction: dims {list(self.p.weights[k].dims)}", f"t = self.w{k}",
                      *sub.lines, f"w{k} = t"]
        return lines


def _generator(p: Program, contraction: str) -> TorchGen:
    if contraction not in CONTRACTIONS:
        raise OptionError(f"contraction {shown(contraction)} is not one of {', '.join(CONTRACTIONS)}")
    return _MatmulGen(p) if contraction == "matmul" else TorchGen(p)


def program_to_source(program: Mapping[str, Any] | Program, class_name: str = "SynoOperator",
                      header: str = "", contraction: str = "conv") -> str:
    """Python source of a standalone module defining ``class <class_name>(torch.nn.Module)``.

    ``__init__`` creates ``self.w0, self.w1, ...`` (program weight order and shapes), drawn from
    ``U(-b, b)`` with ``b = sqrt(3) · std`` and ``std`` from ``syno_automl.ir.weight_stds``;
    ``forward(self, x)`` runs the steps. ``header`` (e.g. a description of the operator) is placed at the top
    as ``#`` comment lines. ``contraction``: ``"conv"`` (unfold + contract as one convolution) or ``"matmul"``
    (always mm/bmm; module docstring)."""
    if not class_name.isidentifier():
        raise OptionError(f"class name {shown(class_name)} is not an identifier")
    p = parse(program)
    gen = _generator(p, contraction)
    walk(p, gen)
    stds = weight_stds(p)

    src: list[str] = []
    for line in header.splitlines():
        src.append(line if line.startswith("#") else ("# " + line).rstrip())
    src.append("# Generated by syno_automl.codegen.torch from a kernel-IR program (docs/architecture.md §2).")
    src += ["import torch", "import torch.nn.functional as F", "", ""]
    src.append(f"class {class_name}(torch.nn.Module):")
    src.append('    """Syno operator.')
    src.append("")
    src.append(f"    input dims {list(p.input.dims)} shape {list(p.input.shape)} -> "
               f"output dims {list(p.output.dims)} shape {list(p.output.shape)}")
    if p.free_dims:
        src.append(f"    free (run-time sized) dims: {list(p.free_dims)}")
    for k, w in enumerate(p.weights):
        src.append(f"    w{k}: dims {list(w.dims)} shape {list(w.shape)}")
    src.append('    """')
    src.append("")
    src.append("    def __init__(self):")
    src.append("        super().__init__()")
    for k, w in enumerate(p.weights):
        shape = ", ".join(str(s) for s in w.shape)
        src.append(f"        self.w{k} = torch.nn.Parameter(torch.empty({shape}))  # dims {list(w.dims)}")
    src.append("        self.reset_parameters()")
    src.append("")
    src.append("    def reset_parameters(self):")
    if not p.weights:
        src.append("        pass")
    else:
        src.append("        # Var(out) = Var(x) / 3 at init, as nn.Conv2d / nn.Linear (syno_automl.ir.init)")
    for k, std in enumerate(stds):
        bound = math.sqrt(3.0) * std
        src.append(f"        torch.nn.init.uniform_(self.w{k}, {-bound!r}, {bound!r})  # std {std:.6g}")
    src.append("")
    src.append("    def forward(self, x):")
    src.append(f"        # T dims {list(p.input.dims)}")
    for line in gen.weight_lines():
        src.append("        " + line)
    src.append("        t = x")
    for line in gen.lines:
        src.append("        " + line)
    src.append("        return t")
    return "\n".join(src) + "\n"


def build_module(program: Mapping[str, Any] | Program, class_name: str = "SynoOperator", contraction: str = "conv"):
    """Execute ``program_to_source(program, class_name, contraction=contraction)`` and instantiate the class
    (codegen/loader.py: the generated text stays visible to tracebacks, ``inspect`` and ``torch.compile`` while
    the class lives)."""
    return load_class(program_to_source(program, class_name, contraction=contraction), class_name)()
