"""torch -> Relax: export, the converters TVM 0.27 lacks, legalization and fusion, the untuned build.

1. ``torch.export.export(model.eval(), example_inputs)`` (batch 1 in the paper's setting);
2. torch's core-ATen decompositions, except ``aten.roll`` and ``aten.unfold``, then
   ``tvm.relax.frontend.torch.from_exported_program`` with the weights embedded as constants. Two converters of our
   own (:data:`CUSTOM_CONVERTERS`), each one TE compute of pure index arithmetic: ``aten.unfold`` has no converter in
   TVM 0.27; ``aten.roll`` would otherwise become ``index_select`` on a constant index tensor, i.e. a ``take``
   kernel with an integer input, which MetaSchedule measures on random indices (out of bounds: a crash or garbage);
3. preparation (``stack-notes §2``): ``DecomposeOpsForInference``, ``CanonicalizeBindings``, then the ``zero``
   pipeline (``LegalizeOps`` -> TIR, ``FoldConstant``, ``FuseOps``/``FuseTIR``): MetaSchedule's task extraction
   only sees ``call_tir`` PrimFuncs.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

__all__ = ["CUSTOM_CONVERTERS", "as_tuple", "export_program", "export_relax", "prepare_relax", "build_untuned",
           "relax_run", "first_output", "float_inputs_only"]


def _convert_unfold(node, importer):
    """``aten.unfold(x, dim, size, step)``: ``out[..., i, ..., j] = x[..., i*step + j, ...]``, the window dim
    appended last (torch's layout). Emitted as one TE compute, so FuseOps treats it as an injective op."""
    from tvm import te

    x = importer.env[node.args[0]]
    dim, size, step = (int(a) for a in node.args[1:4])

    def unfold(data):
        shape = [int(s) for s in data.shape]
        d = dim % len(shape)
        length = (shape[d] - size) // step + 1
        out_shape = shape[:d] + [length] + shape[d + 1 :] + [size]

        def body(*idx):
            src = list(idx[:-1])
            src[d] = idx[d] * step + idx[-1]
            return data(*src)

        return te.compute(out_shape, body, name="unfold")

    return importer.block_builder.emit_te(unfold, x)


def _convert_roll(node, importer):
    """``aten.roll(x, shifts, dims)``: ``out[..., i, ...] = x[..., (i - shift) mod n, ...]`` as one TE compute
    (pure index arithmetic). torch's own decomposition (kept out, see :func:`export_relax`) builds an index
    tensor for ``index_select``, which becomes a ``take`` kernel with an integer input: MetaSchedule measures
    candidates on random inputs, so that index tensor would be random (out of bounds: crashes or garbage)."""
    from tvm import te, tirx

    x = importer.env[node.args[0]]
    shifts = node.args[1] if len(node.args) > 1 else node.kwargs.get("shifts")
    dims = node.args[2] if len(node.args) > 2 else node.kwargs.get("dims", [])
    shifts = [int(v) for v in (shifts if isinstance(shifts, (list, tuple)) else [shifts])]
    dims = [int(v) for v in (dims if isinstance(dims, (list, tuple)) else [dims])]
    if not dims or len(dims) != len(shifts):  # roll of the flattened tensor: the importer's own lowering
        return importer._roll(node)

    def roll(data):
        shape = [int(v) for v in data.shape]
        moves = {d % len(shape): sh for d, sh in zip(dims, shifts)}

        def body(*idx):
            src = list(idx)
            for d, sh in moves.items():
                n = shape[d]
                src[d] = tirx.floormod(idx[d] + ((-sh) % n), n)
            return data(*src)

        return te.compute(shape, body, name="roll")

    return importer.block_builder.emit_te(roll, x)


CUSTOM_CONVERTERS = {"unfold.default": _convert_unfold, "roll.default": _convert_roll}


def as_tuple(example_inputs) -> tuple:
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def export_program(model, example_inputs):
    """``torch.export`` of ``model`` in eval mode (a deep copy: the caller's model is left as it was)."""
    import torch

    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        return torch.export.export(model, as_tuple(example_inputs))


def export_relax(model_or_program, example_inputs=None):
    """A torch model (or an ``ExportedProgram``) -> a Relax IRModule whose ``main`` takes the user inputs
    only (weights and buffers embedded as constants)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    ep = model_or_program
    if not isinstance(ep, torch.export.ExportedProgram):
        ep = export_program(model_or_program, example_inputs)
    table = torch.export.default_decompositions()
    for op in (torch.ops.aten.roll.default, torch.ops.aten.unfold.default):
        table.pop(op, None)  # converted by CUSTOM_CONVERTERS
    ep = ep.run_decompositions(table)
    return from_exported_program(
        ep,
        keep_params_as_input=False,
        unwrap_unit_return_tuple=True,
        custom_convert_map=CUSTOM_CONVERTERS,
        run_ep_decomposition=False,
    )


def prepare_relax(mod, target):
    """Legalize and fuse (see the module docstring, step 3): every kernel becomes a ``call_tir`` PrimFunc."""
    import tvm
    from tvm import relax

    prep = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.get_pipeline("zero"),
        ]
    )
    with target:
        return prep(mod)


def build_untuned(mod, tgt):
    import tvm

    if tgt.kind.name == "cuda":
        from syno_automl.codegen.tvm import default_gpu_schedule

        mod = default_gpu_schedule(mod, tgt)
    return tvm.compile(mod, target=tgt)


def relax_run(model, example_inputs, target: Any = "llvm") -> np.ndarray:
    """The model's output computed through Relax (default schedules), for checking the import."""
    import tvm
    from tvm import relax

    from syno_automl.codegen.tvm import device_for, make_target

    tgt = make_target(target)
    mod = prepare_relax(export_relax(model, example_inputs), tgt)
    dev = device_for(tgt)
    vm = relax.VirtualMachine(build_untuned(mod, tgt), dev)
    args = [tvm.runtime.tensor(t.detach().cpu().numpy(), dev) for t in as_tuple(example_inputs)]
    return first_output(vm["main"](*args))


def first_output(out) -> np.ndarray:
    while not hasattr(out, "numpy"):
        out = out[0]
    return out.numpy()


def float_inputs_only(mod) -> bool:
    from syno_automl.codegen.tvm import arg_shapes

    try:
        return all(dtype.startswith(("float", "bfloat")) for _, dtype in arg_shapes(mod["main"]))
    except Exception:  # noqa: BLE001 -- an input that cannot be read is not a float input
        return False
