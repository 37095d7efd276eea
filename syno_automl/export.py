"""An operator as a drop-in PyTorch layer: one standalone file (torch only) and, optionally, its trained weights.

The file defines the generated operator class and ``SynoLayer``, which stands where the replaced ``Conv2d``,
``Conv1d`` or ``Linear`` stood in the search: it checks the input's sizes (one clear ValueError; the generated code is
specialised to the recorded sizes, only run-time sized dims such as the batch may vary), adds the per-channel
bias the search added, and can re-apply the search's initialisation (`match_output_std`). Its ``state_dict``
keys are those of the search's Placeholder (``operator.w0``, ..., ``bias``), so the trained weights kept as
the trial's MLflow artifact ``weights.pt`` load as they are. Run the file to smoke-test it.

Example:
    >>> source = layer_source(op, 0, kind="conv2d", bias=True)   # doctest: +SKIP
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from syno_automl.echo import shown
from syno_automl.errors import OptionError, OutputPathError, WeightsNotFoundError
from syno_automl.space import Operator

__all__ = ["layer_source", "weights_for_mapping", "check_output_path", "write_output"]

_TEMPLATE = '''

class SynoLayer(torch.nn.Module):
    """Operator {hash} in place of a {kind} layer{bias_note}.

    Input {input_text}, output {output_text} (None: any size at run time). Other sizes raise ValueError: the
    operator was generated for these sizes (``syno-automl export --mapping`` picks another replaced layer).
    """

    KIND = {kind!r}
    INPUT_SHAPE = {input_shape!r}
    OUTPUT_SHAPE = {output_shape!r}

    def __init__(self, bias: bool = {bias!r}) -> None:
        super().__init__()
        self.operator = {class_name}()
        self.bias = torch.nn.Parameter(torch.zeros({channels})) if bias else None

    def _check(self, x: torch.Tensor) -> None:
        expected = self.INPUT_SHAPE
        if x.dim() != len(expected) or any(e is not None and s != e for s, e in zip(x.shape, expected)):
            raise ValueError(f"SynoLayer (operator {hash}) expects an input of shape {{list(expected)}} "
                             f"(None: any size), got {{list(x.shape)}}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
{forward}

    @torch.no_grad()
    def match_output_std(self, x: torch.Tensor, target_std: float) -> None:
        """The search's initialisation: scales the K weights by (target_std / output std) ** (1 / K), so that the
        output on `x` has the standard deviation of the replaced layer's output (`target_std`)."""
        weights = [p for p in self.operator.parameters() if p.requires_grad]
        std = float(self.operator(x.reshape(-1, x.shape[-1]) if self.KIND == "linear" else x).float().std())
        if weights and std > 0 and target_std > 0:
            for p in weights:
                p.mul_((target_std / std) ** (1.0 / len(weights)))


if __name__ == "__main__":  # smoke test: python this_file.py [weights.pt]
    import sys

    layer = SynoLayer()
    if len(sys.argv) > 1:
        layer.load_state_dict(torch.load(sys.argv[1], weights_only=True))
    shape = [2 if s is None else s for s in layer.INPUT_SHAPE]
    y = layer(torch.randn(shape))
    assert all(e is None or s == e for s, e in zip(y.shape, [2 if s is None else s for s in layer.OUTPUT_SHAPE]))
    assert bool(torch.isfinite(y).all()), "non-finite output"
    try:
        layer(torch.randn([s + 1 for s in shape]))
    except ValueError:
        pass
    else:
        raise AssertionError("an input of another shape was accepted")
    print(f"ok: {{list(shape)}} -> {{list(y.shape)}}")
'''

_CHANNELS_FIRST = '''        self._check(x)
        y = self.operator(x)
        if self.bias is not None:
            y = y + self.bias.view(1, -1, *([1] * (y.dim() - 2)))
        return y'''

_FORWARD = {  # by the replaced layer's kind (syno_automl.placeholder.layers.KINDS)
    "conv1d": _CHANNELS_FIRST,
    "conv2d": _CHANNELS_FIRST,
    "linear": '''        self._check(x)
        lead = x.shape[:-1]
        y = self.operator(x.reshape(-1, x.shape[-1]))
        y = y.reshape(*lead, y.shape[-1])
        if self.bias is not None:
            y = y + self.bias
        return y''',
}


def _shape(part: dict[str, Any], free: set[int]) -> tuple[int | None, ...]:
    return tuple(None if d in free else int(s) for d, s in zip(part["dims"], part["shape"]))


def layer_source(op: Operator, mapping: int = 0, *, kind: str = "conv2d", bias: bool = True) -> str:
    """A standalone file (torch only): the generated operator class and ``SynoLayer`` (see the module doc).

    `kind`: the replaced layer, ``conv2d`` or ``conv1d`` (channels on dim 1) or ``linear`` (channels last; leading
    dims are flattened as the search did). `bias`: add the zero-initialised per-channel bias the search added."""
    if kind not in _FORWARD:
        raise OptionError(f"kind must be one of {', '.join(map(repr, _FORWARD))}, got {shown(kind)}")
    program = op.program(mapping)
    free = {int(d) for d in program.get("free_dims", [])}
    inp, out = _shape(program["input"], free), _shape(program["output"], free)
    if kind == "linear":  # the layer sees [..., C_in]; the operator sees it flattened to [N, C_in]
        inp, out = (None, inp[-1]), (None, out[-1])
    channels = out[-1] if kind == "linear" else out[1]
    class_name = f"Syno_{op.hash}"
    text = lambda s: "[" + ", ".join("None" if v is None else str(v) for v in s) + "]"  # noqa: E731
    return op.to_source(mapping).rstrip() + "\n" + _TEMPLATE.format(
        hash=op.hash, kind=kind, class_name=class_name, bias=bool(bias), channels=channels,
        bias_note=", with the per-channel bias the search added" if bias else "",
        input_shape=inp, output_shape=out, input_text=text(inp), output_text=text(out), forward=_FORWARD[kind])


def weights_for_mapping(saved: dict[str, Any], mapping: dict[str, int]) -> dict[str, Any]:
    """The state dict of the first replaced layer with `mapping`'s sizes, from a trial's ``weights.pt``."""
    for layer in saved.get("layers", []):
        if {k: int(v) for k, v in layer["mapping"].items()} == {k: int(v) for k, v in mapping.items()}:
            return layer["state"]
    raise WeightsNotFoundError(f"no trained layer with sizes {mapping} in the weights (layers: "
                               f"{[layer['name'] for layer in saved.get('layers', [])]})")


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """`path` as a file to write, checked before any work is done: its folder must exist (an OutputPathError
    naming the folder, not a raw ``[Errno 2]`` after the study was loaded) and it must not be a folder itself."""
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist (create it first)"
        raise OutputPathError(f"cannot write {shown(str(target))}: the folder {shown(str(folder))} {why}")
    if target.is_dir():
        raise OutputPathError(f"cannot write {shown(str(target))}: it is a folder (give a file name, e.g. "
                              f"{shown(str(target / 'operator.py'))})")
    return target


def write_output(path: str | os.PathLike[str], text: str) -> Path:
    """Writes `text` to `path` (check_output_path's checks first); returns the path written."""
    target = check_output_path(path)
    target.write_text(text)
    return target
