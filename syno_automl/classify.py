"""Names an operator's known form (issue 25, point 6): convolution (conv2d, conv1d), grouped / depthwise
convolution, 1x1 (pointwise) conv, linear, block-diagonal linear, pooling — up to a fixed permutation of channels —
or None for a new operator.

It reads the operator's primitives (``op.primitives``), after removing what only permutes channels:
a SHIFT of a channel coordinate (a cyclic relabelling) and the order of the two parts of a channel SPLIT or MERGE
(interleaved vs blocked channels). A form is then recognized by its single CONTRACTION: which coordinates it
shares (the input channels or their groups, the windows of UNFOLDs of H and W, or of L) and adds (the output
channels). A spec with one spatial coordinate ([N, C_in, L]) names 1-D forms: ``conv1d 3``, ``pointwise conv1d``.

Example:
    >>> from syno_automl import OperatorSpace, known
    >>> space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]",
    ...     ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2"],
    ...     [{"N": 1, "C_in": 4, "C_out": 8, "H": 8, "W": 8}], max_depth=6)
    >>> classify(known.conv2d(space))
    'conv2d 3x3'
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from syno_automl import _native

__all__ = ["classify"]

_PRIMITIVE = re.compile(r"^(?P<kind>[A-Z]+) (?P<rest>.*)$")


@dataclass
class _Parsed:
    kind: str
    size: str = ""               # REDUCE, SHIFT, STRIDE: the coordinate; SPLIT: the one split; MERGE: the result
    parts: tuple[str, ...] = ()  # SPLIT: [outer, inner]; MERGE: [outer, inner]; UNFOLD: [main, window]
    share: tuple[str, ...] = ()
    outer: tuple[str, ...] = ()


def _items(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _parse(description: str) -> _Parsed:
    m = _PRIMITIVE.match(description.strip())
    if not m:
        return _Parsed("?")
    kind, rest = m["kind"], m["rest"]
    if kind == "CONTRACTION":
        c = re.match(r"share \[(.*)\] outer \[(.*)\]$", rest)
        return _Parsed(kind, share=_items(c[1]), outer=_items(c[2])) if c else _Parsed("?")
    if kind in ("SPLIT", "UNFOLD"):
        c = re.match(r"(.*) -> \[(.*)\]$", rest)
        return _Parsed(kind, c[1].strip(), _items(c[2])) if c else _Parsed("?")
    if kind == "MERGE":
        c = re.match(r"\[(.*)\] -> (.*)$", rest)
        return _Parsed(kind, c[2].strip(), _items(c[1])) if c else _Parsed("?")
    return _Parsed(kind, rest.split(" by ")[0].strip())


def _shape_names(shape: str) -> list[str]:
    """The variable of each coordinate of a shape ("" for a product of several)."""
    return [d["factors"][0][0] if len(d["factors"]) == 1 and d["factors"][0][1] == 1 else ""
            for d in _native.parse_shape(shape)]


def _variables(size: str) -> set[str]:
    return {f.split("^")[0] for f in size.split("*") if f and f != "1"}


class _Reader:
    """The space's channel and spatial variables (a conv spec [N, C_in, H, W] or [N, C_in, L], a linear one
    [N, C_in])."""

    def __init__(self, space: Any) -> None:
        inputs, outputs = _shape_names(space.input_shape), _shape_names(space.output_shape)
        self.c_in = inputs[1] if len(inputs) >= 2 else ""
        self.c_out = outputs[1] if len(outputs) >= 2 else ""
        self.spatial = {n for n in inputs[2:] + outputs[2:] if n}
        self.conv = len(inputs) >= 3
        self.one_d = len(inputs) == 3  # one spatial coordinate: 1-D forms
        self.primary = {v["name"] for v in space.variables if v["primary"]}
        self.values = space.mapping(0)

    def value(self, size: str) -> str:
        """A coefficient size's value in the first mapping ("3" for k=3), or the size itself."""
        total = 1.0
        for factor in size.split("*"):
            name, _, exponent = factor.partition("^")
            if name not in self.values or name in self.primary:
                return size
            total *= self.values[name] ** int(exponent or 1)
        return f"{total:g}"

    def channel_only(self, size: str) -> bool:
        """A coordinate of channels alone (its primary variables are channel variables)."""
        primaries = _variables(size) & self.primary
        return bool(primaries) and primaries <= {self.c_in, self.c_out}


def _normalize(reader: _Reader, prims: list[_Parsed]) -> tuple[list[_Parsed], bool]:
    """The primitives without channel permutations; whether any was removed or reordered."""
    out, permuted = [], False
    for p in prims:
        if p.kind == "SHIFT" and reader.channel_only(p.size):
            permuted = True
            continue
        if p.kind in ("SPLIT", "MERGE") and reader.channel_only(p.size) and len(p.parts) == 2:
            ordered = tuple(sorted(p.parts))
            permuted |= ordered != p.parts
            p = _Parsed(p.kind, p.size, ordered)
        out.append(p)
    return out, permuted


def _windows(reader: _Reader, prims: list[_Parsed]) -> list[tuple[str, str]] | None:
    """(main, window) of every UNFOLD, or None if one is not over a spatial coordinate."""
    found = [(p.size, p.parts[1]) for p in prims if p.kind == "UNFOLD" and len(p.parts) == 2]
    unfolds = [p for p in prims if p.kind == "UNFOLD"]
    if len(found) != len(unfolds) or any(main not in reader.spatial for main, _ in found):
        return None
    return found


def _pooling(reader: _Reader, prims: list[_Parsed]) -> str | None:
    """A weightless operator that sums windows or blocks of spatial coordinates."""
    if not any(p.kind == "REDUCE" for p in prims):
        return None
    for p in prims:
        if p.kind in ("UNFOLD", "SPLIT", "STRIDE") and _variables(p.size) & reader.primary <= reader.spatial:
            continue
        if p.kind == "REDUCE" and not _variables(p.size) & reader.primary:
            continue
        return None
    return "pooling"


def _conv_name(reader: _Reader, windows: list[tuple[str, str]], groups: str | None, depthwise: bool) -> str:
    if depthwise:
        prefix = "depthwise "
    elif groups:
        prefix = "grouped "
    else:
        prefix = ""
    if not windows:
        if reader.conv:
            base = "pointwise conv1d" if reader.one_d else "1x1 conv"
        else:
            base = "block-diagonal linear" if groups else "linear"
            prefix = ""
    else:
        sizes = [reader.value(w) for _, w in windows]
        if reader.one_d:
            base = f"conv1d {sizes[0]}"
        else:
            base = "conv2d " + ("x".join(sizes) if len(sizes) == 2 else f"{sizes[0]}x1")
    name = prefix + base
    if groups:
        name += f", {groups} {'blocks' if name.startswith('block') else 'groups'}"
    return name


def _single_weight(reader: _Reader, prims: list[_Parsed]) -> str | None:
    (c,) = [p for p in prims if p.kind == "CONTRACTION"]
    windows = _windows(reader, prims)
    if windows is None or (reader.one_d and len(windows) > 1):  # two windows of L: not a conv1d's one
        return None
    splits = [p for p in prims if p.kind == "SPLIT"]
    merges = [p for p in prims if p.kind == "MERGE"]
    reduces = Counter(p.size for p in prims if p.kind == "REDUCE")
    if any(p.kind not in ("REDUCE", "UNFOLD", "SPLIT", "MERGE", "CONTRACTION") for p in prims):
        return None
    window_sizes = Counter(w for _, w in windows)
    share, outer = Counter(c.share), Counter(c.outer)
    # dense: every input channel and window summed against the weight, the output channels made by it
    if not splits and not merges:
        if reader.c_in == reader.c_out and share == Counter({reader.c_in: 1}) + window_sizes and not outer \
                and reduces == window_sizes:
            return _conv_name(reader, windows, None, depthwise=True)
        if share == Counter({reader.c_in: 1}) + window_sizes and outer == Counter({reader.c_out: 1}) \
                and reduces == Counter({reader.c_in: 1}) + window_sizes:
            return _conv_name(reader, windows, None, depthwise=False)
        return None
    # grouped: C_in split into (groups, per group), the groups shared, the output channels merged from them
    if len(splits) != 1 or len(merges) != 1 or splits[0].size != reader.c_in or merges[0].size != reader.c_out:
        return None
    common = set(splits[0].parts) & set(merges[0].parts)
    for g in sorted(common):
        per_in = [x for x in splits[0].parts if x != g] or [g]
        per_out = [x for x in merges[0].parts if x != g] or [g]
        if share == Counter({g: 1, per_in[0]: 1}) + window_sizes and outer == Counter({per_out[0]: 1}) \
                and reduces == Counter({per_in[0]: 1}) + window_sizes:
            return _conv_name(reader, windows, g, depthwise=False)
    return None


def classify(op: Any) -> str | None:
    """The known form `op` is, up to a fixed permutation of channels (", channels permuted" is appended when
    the operator permutes them), or None for a new operator."""
    reader = _Reader(op.space)
    prims, permuted = _normalize(reader, [_parse(p) for p in op.primitives])
    weights = sum(p.kind == "CONTRACTION" for p in prims)
    if weights == 0:
        name = _pooling(reader, prims)
    elif weights == 1:
        name = _single_weight(reader, prims)
    else:
        name = None
    if name is None:
        return None
    return name + (", channels permuted" if permuted else "")
