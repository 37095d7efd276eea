"""The Placeholder module.

A :class:`Placeholder` is an ``nn.Module`` slot. Until an operator module is set it runs the layer it stands
for (``referred_layer``), so a model with placeholders behaves exactly like the original one; once
``set_operator(module)`` is called it runs the synthesized operator instead.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from syno_automl.echo import shown
from syno_automl.errors import NoOperatorError, OptionError, SubstitutionError
from syno_automl.placeholder.layers import KINDS

__all__ = ["Placeholder"]


class Placeholder(nn.Module):
    """A slot for a synthesized operator.

    Args:
        mapping: values of the space's variables for this slot (e.g. ``{"H": 32, "W": 32}``).
        referred_layer: the original layer, run while no operator is set (optional: a hand-placed slot may
            have none, and then needs an operator before it can run).
        kind: ``"conv1d"``, ``"conv2d"``, ``"linear"`` or None. ``"linear"`` flattens the leading dims into one
            (the operator sees ``[N, C_in]``) and restores them; a conv adds the bias on dim 1, ``"linear"`` on
            the last dim.

    While no operator is set, ``referred_layer`` is a registered submodule (its parameters are the model's).
    ``set_operator(module)`` registers ``module`` as ``self.operator`` and *un-registers* the original layer
    (still reachable as ``referred_layer``), so ``model.parameters()`` and ``state_dict()`` hold only the live
    weights; ``reset()`` reverts that. ``input_shape``/``output_shape`` are the sizes recorded by
    :func:`substitute`'s forward pass (or by :func:`record_shapes`).
    """

    def __init__(self, mapping: Mapping[str, int] | None = None, referred_layer: nn.Module | None = None, *,
                 kind: str | None = None) -> None:
        super().__init__()
        if kind is not None and kind not in KINDS:
            raise OptionError(f"kind must be None or one of {', '.join(map(repr, KINDS))}, got {shown(kind)}")
        self.mapping: dict[str, int] = {str(k): int(v) for k, v in (mapping or {}).items()}
        self.kind = kind
        self.input_shape: tuple[int, ...] | None = None
        self.output_shape: tuple[int, ...] | None = None
        self.recording = False
        self.operator: nn.Module | None = None
        self.bias: nn.Parameter | None = None
        self._register_original(referred_layer)

    def _register_original(self, layer: nn.Module | None) -> None:
        """``referred_layer`` as a registered submodule (its parameters count as the model's)."""
        self.__dict__.pop("referred_layer", None)
        if layer is None:
            self._modules.pop("referred_layer", None)
            object.__setattr__(self, "referred_layer", None)
        else:
            self._modules["referred_layer"] = layer

    def _unregister_original(self) -> None:
        """``referred_layer`` as a plain attribute: kept, but not part of parameters()/state_dict()."""
        layer = self._modules.pop("referred_layer", None)
        if layer is not None:
            object.__setattr__(self, "referred_layer", layer)

    @property
    def has_operator(self) -> bool:
        return self.operator is not None

    def set_operator(self, module: nn.Module, bias: bool | None = None) -> Placeholder:
        """Runs ``module`` from now on. ``bias``: add a fresh zero bias per output channel (default: iff the
        original layer had one). The module is moved to the original layer's device and dtype."""
        ref = self.referred_layer
        like = _first_tensor(ref) if ref is not None else None
        if like is not None:
            module = module.to(device=like.device, dtype=like.dtype)
        if bias is None:
            bias = ref is not None and getattr(ref, "bias", None) is not None
        if bias and self.kind is None:
            raise SubstitutionError(f"a bias needs a kind ({', '.join(map(repr, KINDS))}) to know the channel dim")
        self._unregister_original()  # the original weights are no longer part of the model
        self.operator = module
        if bias:
            channels = self._out_channels()
            self.bias = nn.Parameter(torch.zeros(channels, device=like.device if like is not None else None,
                                                 dtype=like.dtype if like is not None else None))
        else:
            self.bias = None
        return self

    def reset(self) -> Placeholder:
        """Drops the operator (and its bias): the original layer runs again."""
        device = None
        if self.operator is not None:
            t = _first_tensor(self.operator)
            device = t.device if t is not None else None
        self.operator = None
        self.bias = None
        ref = self.referred_layer
        if ref is not None:
            if device is not None:
                t = _first_tensor(ref)
                if t is not None and t.device != device:
                    ref.to(device)
            ref.train(self.training)  # model.train()/eval() did not reach it while unregistered
            self._register_original(ref)
        return self

    def _out_channels(self) -> int:
        if self.output_shape is not None:
            return int(self.output_shape[KINDS[self.kind].channel_dim if self.kind else -1])
        key = "C_out"
        if key in self.mapping:
            return self.mapping[key]
        ref = self.referred_layer
        for attr in ("out_channels", "out_features"):
            if ref is not None and hasattr(ref, attr):
                return int(getattr(ref, attr))
        raise SubstitutionError("cannot tell the number of output channels for the bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.operator is None:
            ref = self.referred_layer
            if ref is None:
                raise NoOperatorError(f"Placeholder({self.mapping}) has no operator set and no original layer: "
                                      f"call set_operator() (or install()/Substitution.apply()) first")
            out = ref(x)
        elif self.kind == "linear":
            lead = x.shape[:-1]
            out = self.operator(x.reshape(-1, x.shape[-1]))
            out = out.reshape(*lead, out.shape[-1])
            if self.bias is not None:
                out = out + self.bias
        else:
            out = self.operator(x)
            if self.bias is not None:
                out = out + self.bias.reshape(-1, *([1] * (out.dim() - 2)))
        if self.recording:
            self.input_shape = tuple(x.shape)
            self.output_shape = tuple(out.shape)
        return out

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Placeholder:
        """Every tensor of the slot (the operator's too) through ``fn``, a rank-5 one as a rank-6 view.

        ``Module.to(memory_format=torch.channels_last)``, the usual first step on a GPU, gives that layout to
        every 4-D and 5-D tensor and fails on a 5-D one (``required rank 4 tensor to use channels_last
        format``); an operator may hold a 5-D weight (a grouped conv's ``[g, C_out/g, C_in/g, k, k]``). As a 6-D
        view it keeps its layout, as torch keeps a 3-D or 6-D weight's, while device and dtype still change;
        its shape, the state_dict and the TVM kernels' weight order and shapes stay as they are."""
        return super()._apply(_rank5_as_rank6(fn), recurse)

    def extra_repr(self) -> str:
        state = "operator set" if self.operator is not None else (
            "original layer" if self.referred_layer is not None else "empty")
        return f"mapping={self.mapping}, kind={self.kind}, {state}"


def _first_tensor(module: nn.Module) -> torch.Tensor | None:
    for t in module.parameters():
        return t
    for t in module.buffers():
        return t
    return None


def _rank5_as_rank6(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``fn`` that hands a 5-D tensor to the wrapped ``fn`` as a 6-D view and returns it as 5-D again."""
    def apply(t: torch.Tensor) -> torch.Tensor:
        return fn(t.unsqueeze(0)).squeeze(0) if t.dim() == 5 else fn(t)
    return apply
