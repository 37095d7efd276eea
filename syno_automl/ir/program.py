"""The typed kernel IR (docs/architecture.md §2): frozen dataclasses for a program, its tensors and its steps.

:func:`syno_automl.ir.parse` builds a :class:`Program` from the native dict once (and validates it);
:meth:`Program.to_dict` gives the dict back (int keys). :data:`STEP_OPS` lists the step ops every step backend
must handle (tests/ir/test_ir.py checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from syno_automl.ir.expr import Expr

__all__ = ["STEP_OPS", "WEIGHT_VIEW_OPS", "Tensor", "Step", "Split", "Merge", "Shift", "Stride", "Unfold", "Expand",
           "Reduce", "Contract", "Oracle", "Program"]


@dataclass(frozen=True)
class Tensor:
    """A tensor of the program: its dim ids and sizes, in its layout order. ``fan_in``: the native core's
    informational figure for weights (None for x and out); initialization is derived by ir.init instead.
    ``views``: a weight's view steps (split, merge, shift, stride, unfold) and contractions with other weights,
    applied to the parameter before its contract step (the planner's; :func:`syno_automl.ir.walk.viewed_weight`)."""

    dims: tuple[int, ...]
    shape: tuple[int, ...]
    fan_in: float | None = None
    views: tuple[Step, ...] = ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Step:
    """Base of the step ops; ``op`` is the dict's ``"op"``."""

    op = ""

    def text(self) -> str:
        return self.op


@dataclass(frozen=True)
class Split(Step):
    src: int
    dst: tuple[int, int]  # (outer a, inner b)
    op = "split"

    def text(self) -> str:
        return f"split {self.src} -> {list(self.dst)}"


@dataclass(frozen=True)
class Merge(Step):
    src: tuple[int, int]  # (a, b): d = a * |b| + b
    dst: int
    op = "merge"

    def text(self) -> str:
        return f"merge {list(self.src)} -> {self.dst}"


@dataclass(frozen=True)
class Shift(Step):
    src: int
    dst: int
    op = "shift"

    def text(self) -> str:
        return f"shift {self.src} -> {self.dst}: out[e] = in[(e + 1) mod n]"


@dataclass(frozen=True)
class Stride(Step):
    src: int
    dst: int
    stride: int
    op = "stride"

    def text(self) -> str:
        return f"stride {self.src} -> {self.dst} by {self.stride}: out[e] = in[e * {self.stride}]"


@dataclass(frozen=True)
class Unfold(Step):
    src: int
    dst: tuple[int, int]  # (main m, window w)
    window: int
    op = "unfold"

    def text(self) -> str:
        return f"unfold {self.src} -> {list(self.dst)} window {self.window}"


@dataclass(frozen=True)
class Expand(Step):
    dst: int
    op = "expand"

    def text(self) -> str:
        return f"expand -> {self.dst} (broadcast)"


@dataclass(frozen=True)
class Reduce(Step):
    src: int
    mean: bool = False
    op = "reduce"

    def text(self) -> str:
        return f"reduce {self.src} ({'mean' if self.mean else 'sum'})"


@dataclass(frozen=True)
class Contract(Step):
    weight: int
    rename: tuple[tuple[int, int], ...]  # (T's dim, its name in the einsum), in the dict's order
    out: tuple[int, ...]
    op = "contract"

    @property
    def renaming(self) -> dict[int, int]:
        return dict(self.rename)

    def text(self) -> str:
        return f"contract w{self.weight} rename {self.renaming} -> {list(self.out)}"


STEP_TYPES: dict[str, type[Step]] = {t.op: t for t in (Split, Merge, Shift, Stride, Unfold, Expand, Reduce, Contract)}
STEP_OPS = tuple(STEP_TYPES)
WEIGHT_VIEW_OPS = ("split", "merge", "shift", "stride", "unfold", "contract")  # the ops a weight's ``views`` may hold


@dataclass(frozen=True)
class Oracle:
    """``program["expr"]``: the §1 semantics as index expressions (one per tensor dim)."""

    iterators: tuple[int, ...]
    reductions: tuple[int, ...]
    mean: tuple[bool, ...]
    input: tuple[Expr, ...]
    weights: tuple[tuple[Expr, ...], ...]

    @property
    def scale(self) -> float:
        """1 / prod |r_j| over the mean reductions."""
        s = 1.0
        for n, m in zip(self.reductions, self.mean):
            if m:
                s /= n
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"iterators": list(self.iterators), "reductions": list(self.reductions), "mean": list(self.mean),
                "input": [e.to_json() for e in self.input],
                "weights": [[e.to_json() for e in w] for w in self.weights]}


@dataclass(frozen=True)
class Program:
    """A parsed, validated program. ``sizes`` holds every dim id (completed from the tensor specs);
    ``free_dims`` are run-time sized (e.g. the batch); ``extra`` keeps keys this parser does not know."""

    input: Tensor
    weights: tuple[Tensor, ...]
    output: Tensor
    sizes: dict[int, int]
    steps: tuple[Step, ...]
    free_dims: tuple[int, ...] = ()
    flops: int | None = None
    params: int | None = None
    expr: Oracle | None = None
    dtype: str = "float32"
    extra: dict[str, Any] = field(default_factory=dict)

    def size(self, d: int) -> int:
        return self.sizes[d]

    def numel(self, dims) -> int:
        return math.prod(self.sizes[d] for d in dims)

    def to_dict(self) -> dict[str, Any]:
        """The §2 dict (int keys), with the extra keys as they came."""

        def step(s: Step) -> dict[str, Any]:
            d: dict[str, Any] = {"op": s.op}
            for name in s.__dataclass_fields__:
                v = getattr(s, name)
                d[name] = dict(v) if name == "rename" else list(v) if isinstance(v, tuple) else v
            return d

        def tensor(t: Tensor, weight: bool = False) -> dict[str, Any]:
            d: dict[str, Any] = {"dims": list(t.dims), "shape": list(t.shape)}
            if weight and t.fan_in is not None:
                d["fan_in"] = t.fan_in
            if t.views:
                d["views"] = [step(s) for s in t.views]
            return d

        steps = [step(s) for s in self.steps]
        out = dict(self.extra)
        out.update({"input": tensor(self.input), "weights": [tensor(w, True) for w in self.weights],
                    "output": tensor(self.output), "sizes": dict(self.sizes), "steps": steps,
                    "free_dims": list(self.free_dims), "flops": self.flops, "params": self.params})
        if self.expr is not None:
            out["expr"] = self.expr.to_dict()
        if self.dtype != "float32":
            out["dtype"] = self.dtype
        return out
