"""PyTorch code generator for the kernel IR ("program", docs/architecture.md §2).

``program_to_source`` turns a program dict into the text of a standalone Python module (it imports only
``torch`` and ``torch.nn.functional``) defining one ``torch.nn.Module``; ``build_module`` executes that text
and instantiates the class (so ``to_module`` and ``to_source`` share one code path); ``count_flops``
re-derives the FLOPs of §2 from the steps.

Code generation tracks the running tensor T's dim list statically, so ``forward`` is straight-line code.
Lowering of each step (``p`` is the position of the dim in the *materialized* tensor):

* ``split``    -> ``t.unflatten(p, (|a|, |b|))`` (``-1`` for a run-time sized dim)
* ``merge``    -> ``t.permute(..)`` (b right after a, only if needed) + ``t.flatten(p, p + 1)``
* ``shift``    -> ``torch.roll(t, -1, p)``: ``out[e] = in[(e + 1) mod n]``
* ``stride``   -> ``t[:, ..., ::s]``: ``out[e] = in[e * s]``
* ``unfold``   -> ``F.pad`` (k//2 zeros both sides) + ``t.unfold(p, k, 1)`` + ``movedim`` so the window dim
  sits right after the main dim: ``out[m, w] = in[m + w - k//2]`` (0 outside)
* ``expand``   -> nothing at first: the dim is *virtual* (broadcast, not stored). It stays virtual through
  shift/stride/split (a broadcast dim is invariant under them) and through contractions (it is simply left
  out of T's einsum operand; a virtual dim summed by the einsum and not provided by the weight becomes a
  constant factor). It is materialized (``unsqueeze`` + ``expand``, still a view) only when a merge with a
  stored dim, an unfold (zero padding makes it non-constant) or the final output needs it.
* ``reduce``   -> ``t.sum(p)`` / ``t.mean(p)`` (on a virtual dim: ``* n`` / nothing)
* ``contract`` -> ``torch.einsum`` with letters assigned per dim id (a-z, A-Z: at most 52 distinct dims in
  one contraction)
* end          -> materialize what is still virtual, ``permute`` to ``output.dims``

Dims listed in ``program.get("free_dims", [])`` may have any size at run time (e.g. the batch dim): the
generated code never bakes their size in (``-1`` / shape-free view ops are used), so the module works for
any size of them and exports with a dynamic dim.
"""

from __future__ import annotations

import linecache
import math
import string
import sys
import types
from typing import Any

__all__ = ["program_to_source", "build_module", "count_flops", "normalize_program"]

_LETTERS = string.ascii_lowercase + string.ascii_uppercase  # 52 einsum letters


# ----------------------------------------------------------------------------------------------------------
# program normalization (JSON turns int keys into strings)
# ----------------------------------------------------------------------------------------------------------

def _int_keys(mapping: Any) -> dict[int, int]:
    if mapping is None:
        return {}
    if isinstance(mapping, dict):
        return {int(k): int(v) for k, v in mapping.items()}
    # also accept a list of pairs
    return {int(k): int(v) for k, v in mapping}


def normalize_program(program: dict) -> dict:
    """Return a copy of ``program`` with int dim ids everywhere (``sizes``/``rename`` keys may be strings).

    ``sizes`` is completed with the input, weight and output shapes."""
    p = dict(program)
    p["input"] = {"dims": [int(d) for d in program["input"]["dims"]],
                  "shape": [int(s) for s in program["input"]["shape"]]}
    p["output"] = {"dims": [int(d) for d in program["output"]["dims"]],
                   "shape": [int(s) for s in program["output"]["shape"]]}
    weights = []
    for w in program.get("weights", []):
        w2 = dict(w)
        w2["dims"] = [int(d) for d in w["dims"]]
        w2["shape"] = [int(s) for s in w["shape"]]
        if len(w2["dims"]) != len(w2["shape"]):
            raise ValueError(f"weight dims {w2['dims']} and shape {w2['shape']} differ in length")
        weights.append(w2)
    p["weights"] = weights
    sizes = _int_keys(program.get("sizes", {}))
    for spec in [p["input"], p["output"], *weights]:
        if len(spec["dims"]) != len(spec["shape"]):
            raise ValueError(f"dims {spec['dims']} and shape {spec['shape']} differ in length")
        for d, s in zip(spec["dims"], spec["shape"]):
            if sizes.setdefault(d, s) != s:
                raise ValueError(f"dim {d}: size {sizes[d]} in 'sizes' but {s} in a shape")
    p["sizes"] = sizes
    steps = []
    for st in program.get("steps", []):
        st2 = dict(st)
        op = st2.get("op")
        if op == "contract":
            st2["weight"] = int(st2["weight"])
            st2["rename"] = _int_keys(st2.get("rename", {}))
            st2["out"] = [int(d) for d in st2["out"]]
        elif op in ("split", "unfold"):
            st2["src"] = int(st2["src"])
            st2["dst"] = [int(d) for d in st2["dst"]]
        elif op == "merge":
            st2["src"] = [int(d) for d in st2["src"]]
            st2["dst"] = int(st2["dst"])
        elif op in ("shift", "stride"):
            st2["src"] = int(st2["src"])
            st2["dst"] = int(st2["dst"])
        elif op == "expand":
            st2["dst"] = int(st2["dst"])
        elif op == "reduce":
            st2["src"] = int(st2["src"])
            st2["mean"] = bool(st2.get("mean", False))
        else:
            raise ValueError(f"unknown step op {op!r} in {st!r}")
        steps.append(st2)
    p["steps"] = steps
    p["free_dims"] = [int(d) for d in program.get("free_dims", [])]
    return p


def _size(sizes: dict[int, int], d: int) -> int:
    try:
        return sizes[d]
    except KeyError:
        raise ValueError(f"dim {d} has no size in the program") from None


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


# ----------------------------------------------------------------------------------------------------------
# FLOPs (§2): contract = 2 * prod(sizes of all its letters); reduce = numel(T); views = 0
# ----------------------------------------------------------------------------------------------------------

def count_flops(program: dict) -> int:
    """FLOPs of a program by the rule of §2, walking the steps on T's (logical) dim list.

    Broadcast (expanded) dims count as ordinary dims of T, whether or not the generated code stores them."""
    p = normalize_program(program)
    sizes = p["sizes"]
    dims = list(p["input"]["dims"])
    total = 0

    def replace(old: int, new: list[int]) -> None:
        if old not in dims:
            raise ValueError(f"dim {old} is not in T {dims}")
        i = dims.index(old)
        dims[i:i + 1] = new

    for st in p["steps"]:
        op = st["op"]
        if op in ("split", "unfold"):
            replace(st["src"], list(st["dst"]))
        elif op == "merge":
            a, b = st["src"]
            if b not in dims:
                raise ValueError(f"dim {b} is not in T {dims}")
            dims.remove(b)
            replace(a, [st["dst"]])
        elif op in ("shift", "stride"):
            replace(st["src"], [st["dst"]])
        elif op == "expand":
            dims.append(st["dst"])
        elif op == "reduce":
            total += _prod(_size(sizes, d) for d in dims)
            replace(st["src"], [])
        elif op == "contract":
            ren = st["rename"]
            dims = [ren.get(d, d) for d in dims]
            wdims = p["weights"][st["weight"]]["dims"]
            letters = set(dims) | set(wdims) | set(st["out"])
            total += 2 * _prod(_size(sizes, d) for d in letters)
            dims = list(st["out"])
    return total


# ----------------------------------------------------------------------------------------------------------
# code generation
# ----------------------------------------------------------------------------------------------------------

def _einsum_letters(dim_lists: list[list[int]]) -> dict[int, str]:
    """Assign a distinct letter (a-z, A-Z) to each dim id, in order of first appearance."""
    letters: dict[int, str] = {}
    for lst in dim_lists:
        for d in lst:
            if d not in letters:
                if len(letters) >= len(_LETTERS):
                    raise ValueError(f"a contraction over more than {len(_LETTERS)} distinct dims cannot be "
                                     f"written as one torch.einsum")
                letters[d] = _LETTERS[len(letters)]
    return letters


class _Gen:
    """Walks the steps, tracking T's logical dims (``dims``) and which of them are virtual (broadcast,
    not stored in the tensor ``t``)."""

    def __init__(self, program: dict):
        self.p = program
        self.sizes: dict[int, int] = program["sizes"]
        self.free = set(program["free_dims"])
        self.dims: list[int] = list(program["input"]["dims"])
        if len(set(self.dims)) != len(self.dims):
            raise ValueError(f"duplicate input dims {self.dims}")
        self.virtual: set[int] = set()
        self.lines: list[str] = []

    # -- helpers --------------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append(line)

    def phys(self) -> list[int]:
        return [d for d in self.dims if d not in self.virtual]

    def ppos(self, d: int) -> int:
        return self.phys().index(d)

    def need(self, d: int) -> None:
        if d not in self.dims:
            raise ValueError(f"dim {d} is not in T {self.dims}")

    def fresh(self, *ds: int) -> None:
        for d in ds:
            if d in self.dims:
                raise ValueError(f"dim {d} is already in T {self.dims}")

    def size_code(self, d: int) -> str:
        return "-1" if d in self.free else str(_size(self.sizes, d))

    def describe(self) -> str:
        return "[" + ", ".join(f"{d}*" if d in self.virtual else str(d) for d in self.dims) + "]"

    def materialize(self, ds: list[int]) -> None:
        ds = [d for d in self.dims if d in ds and d in self.virtual]
        if not ds:
            return
        for d in ds:  # in logical order, so each unsqueeze position is final
            if d in self.free:
                raise ValueError(f"broadcast dim {d} is free (run-time sized): cannot materialize it")
            self.virtual.discard(d)
            self.emit(f"t = t.unsqueeze({self.ppos(d)})")
        shape = ["-1"] * len(self.phys())
        for d in ds:
            shape[self.ppos(d)] = str(_size(self.sizes, d))
        self.emit(f"t = t.expand({', '.join(shape)})  # materialize broadcast dims {ds}")

    def rename(self, old: int, new: int) -> None:
        i = self.dims.index(old)
        self.dims[i] = new
        if old in self.virtual:
            self.virtual.discard(old)
            self.virtual.add(new)

    # -- steps ----------------------------------------------------------------------------------------
    def step(self, st: dict) -> None:
        op = st["op"]
        self.emit(f"# {_step_text(st)}")
        getattr(self, "op_" + op)(st)
        self.emit(f"# T dims {self.describe()}")

    def op_split(self, st: dict) -> None:
        d, (a, b) = st["src"], st["dst"]
        self.need(d)
        if a == b:
            raise ValueError(f"split {d}: dst dims must differ")
        if a != d:
            self.fresh(a)
        if b != d:
            self.fresh(b)
        sd, sa, sb = (_size(self.sizes, x) for x in (d, a, b))
        if sa * sb != sd:
            raise ValueError(f"split {d} ({sd}) into {a} ({sa}) x {b} ({sb}): sizes do not match")
        i = self.dims.index(d)
        if d in self.virtual:
            self.virtual.discard(d)
            self.virtual.update((a, b))
        else:
            p = self.ppos(d)
            if a in self.free:
                shape = f"(-1, {sb})"
            elif b in self.free:
                shape = f"({sa}, -1)"
            else:
                shape = f"({sa}, {sb})"
            self.emit(f"t = t.unflatten({p}, {shape})")
        self.dims[i:i + 1] = [a, b]

    def op_merge(self, st: dict) -> None:
        (a, b), d = st["src"], st["dst"]
        self.need(a)
        self.need(b)
        if a == b:
            raise ValueError("merge: src dims must differ")
        if d not in (a, b):
            self.fresh(d)
        sa, sb, sd = (_size(self.sizes, x) for x in (a, b, d))
        if sa * sb != sd:
            raise ValueError(f"merge {a} ({sa}) x {b} ({sb}) into {d} ({sd}): sizes do not match")
        if a in self.virtual and b in self.virtual:
            self.dims.remove(b)
            self.virtual -= {a, b}
            self.dims[self.dims.index(a)] = d
            self.virtual.add(d)
            return
        self.materialize([a, b])
        phys = self.phys()
        order = [x for x in phys if x != b]
        order.insert(order.index(a) + 1, b)
        if order != phys:
            self.emit(f"t = t.permute({', '.join(str(phys.index(x)) for x in order)})")
        pa = order.index(a)
        self.emit(f"t = t.flatten({pa}, {pa + 1})")
        self.dims.remove(b)
        self.dims[self.dims.index(a)] = d

    def op_shift(self, st: dict) -> None:
        d, e = st["src"], st["dst"]
        self.need(d)
        if e != d:
            self.fresh(e)
        if _size(self.sizes, d) != _size(self.sizes, e):
            raise ValueError(f"shift {d} -> {e}: sizes differ")
        if d not in self.virtual:
            # out[e] = in[(e + 1) mod n]
            self.emit(f"t = torch.roll(t, -1, {self.ppos(d)})")
        self.rename(d, e)

    def op_stride(self, st: dict) -> None:
        d, e, s = st["src"], st["dst"], int(st["stride"])
        self.need(d)
        if e != d:
            self.fresh(e)
        if s < 1:
            raise ValueError(f"stride {s} < 1")
        if _size(self.sizes, e) * s != _size(self.sizes, d):
            raise ValueError(f"stride {d} -> {e} by {s}: |{d}| = {_size(self.sizes, d)} != "
                             f"{_size(self.sizes, e)} * {s}")
        if d not in self.virtual and s != 1:
            p = self.ppos(d)
            # out[e] = in[e * s]
            self.emit(f"t = t[{':, ' * p}::{s}]")
        self.rename(d, e)

    def op_unfold(self, st: dict) -> None:
        d, (m, w), k = st["src"], st["dst"], int(st["window"])
        self.need(d)
        if m == w:
            raise ValueError("unfold: dst dims must differ")
        if m != d:
            self.fresh(m)
        if w != d:
            self.fresh(w)
        if k < 1 or k % 2 == 0:
            raise ValueError(f"unfold window {k} must be odd")
        if _size(self.sizes, w) != k:
            raise ValueError(f"unfold window dim {w} has size {_size(self.sizes, w)} != window {k}")
        if _size(self.sizes, m) != _size(self.sizes, d):
            raise ValueError(f"unfold main dim {m} size differs from src {d}")
        self.materialize([d])
        p = self.ppos(d)
        nd = len(self.phys())
        h = k // 2
        expr = "t"
        if h:
            pad = ", ".join(["0, 0"] * (nd - 1 - p) + [f"{h}, {h}"])
            expr = f"F.pad(t, ({pad}))"
        expr += f".unfold({p}, {k}, 1)"  # out[m, w] = in[m + w - k//2], zero outside
        if p + 1 != nd:
            expr += f".movedim(-1, {p + 1})"
        self.emit(f"t = {expr}")
        i = self.dims.index(d)
        self.dims[i:i + 1] = [m, w]

    def op_expand(self, st: dict) -> None:
        d = st["dst"]
        self.fresh(d)
        _size(self.sizes, d)
        if d in self.free:
            raise ValueError(f"expand of a free (run-time sized) dim {d} is not supported")
        self.dims.append(d)
        self.virtual.add(d)

    def op_reduce(self, st: dict) -> None:
        d, mean = st["src"], st["mean"]
        self.need(d)
        if d in self.virtual:
            n = _size(self.sizes, d)
            if not mean and n != 1:
                self.emit(f"t = t * {n}  # sum over broadcast dim {d}")
        else:
            self.emit(f"t = t.{'mean' if mean else 'sum'}({self.ppos(d)})")
        self.dims.remove(d)
        self.virtual.discard(d)

    def op_contract(self, st: dict) -> None:
        k, ren, out = st["weight"], st["rename"], st["out"]
        weights = self.p["weights"]
        if not 0 <= k < len(weights):
            raise ValueError(f"contract: no weight {k}")
        for src in ren:
            self.need(src)
        new_dims = [ren.get(d, d) for d in self.dims]
        if len(set(new_dims)) != len(new_dims):
            raise ValueError(f"contract: rename {ren} makes T's dims {new_dims} collide")
        self.virtual = {ren.get(d, d) for d in self.virtual}
        self.dims = new_dims
        wdims = weights[k]["dims"]
        if len(set(wdims)) != len(wdims) or len(set(out)) != len(out):
            raise ValueError("contract: duplicate dims in weight or out")
        for d in wdims:
            if d in self.free:
                raise ValueError(f"weight {k} has free (run-time sized) dim {d}")
        tphys = self.phys()
        tvirt = [d for d in self.dims if d in self.virtual]
        for d in out:
            if d not in self.dims and d not in wdims:
                raise ValueError(f"contract: out dim {d} is in neither T {self.dims} nor w{k} {wdims}")
        # a broadcast dim of T that the weight does not provide stays broadcast in the result
        still_virtual = [d for d in out if d in self.virtual and d not in wdims]
        out_phys = [d for d in out if d not in still_virtual]
        factor = _prod(_size(self.sizes, d) for d in tvirt if d not in wdims and d not in out)
        letters = _einsum_letters([tphys, wdims, out_phys, tvirt])
        eq = ("".join(letters[d] for d in tphys) + "," + "".join(letters[d] for d in wdims) + "->"
              + "".join(letters[d] for d in out_phys))
        line = f"t = torch.einsum('{eq}', t, self.w{k})"
        if factor != 1:
            line += f" * {factor}  # sum over broadcast dims"
        self.emit(line)
        self.dims = list(out)
        self.virtual = set(still_virtual)

    def finish(self) -> None:
        out = self.p["output"]["dims"]
        if sorted(out) != sorted(self.dims):
            raise ValueError(f"after the last step T has dims {self.dims}, output wants {out}")
        self.materialize(list(self.virtual))
        phys = self.phys()
        if phys != out:
            self.emit(f"t = t.permute({', '.join(str(phys.index(d)) for d in out)})")


def _step_text(st: dict) -> str:
    op = st["op"]
    if op == "split":
        return f"split {st['src']} -> {st['dst']}"
    if op == "merge":
        return f"merge {st['src']} -> {st['dst']}"
    if op == "shift":
        return f"shift {st['src']} -> {st['dst']}: out[e] = in[(e + 1) mod n]"
    if op == "stride":
        return f"stride {st['src']} -> {st['dst']} by {st['stride']}: out[e] = in[e * {st['stride']}]"
    if op == "unfold":
        return f"unfold {st['src']} -> {st['dst']} window {st['window']}"
    if op == "expand":
        return f"expand -> {st['dst']} (broadcast)"
    if op == "reduce":
        return f"reduce {st['src']} ({'mean' if st['mean'] else 'sum'})"
    if op == "contract":
        return f"contract w{st['weight']} rename {st['rename']} -> {st['out']}"
    return op


def program_to_source(program: dict, class_name: str = "SynoOperator", header: str = "") -> str:
    """Python source of a standalone module defining ``class <class_name>(torch.nn.Module)``.

    ``__init__`` creates ``self.w0, self.w1, ...`` (program weight order and shapes) initialized with
    ``normal(0, sqrt(2 / fan_in))`` (like ``nn.init.kaiming_normal_``); ``forward(self, x)`` runs the steps.
    ``header`` (e.g. a description of the operator) is placed at the top as ``#`` comment lines."""
    if not class_name.isidentifier():
        raise ValueError(f"class name {class_name!r} is not an identifier")
    p = normalize_program(program)
    gen = _Gen(p)
    for st in p["steps"]:
        gen.step(st)
    gen.finish()

    src: list[str] = []
    for line in header.splitlines():
        src.append(line if line.startswith("#") else ("# " + line).rstrip())
    src.append("# Generated by syno_automl.codegen.torch from a kernel-IR program (docs/architecture.md §2).")
    src += ["import torch", "import torch.nn.functional as F", "", ""]
    src.append(f"class {class_name}(torch.nn.Module):")
    src.append('    """Syno operator.')
    src.append("")
    src.append(f"    input dims {p['input']['dims']} shape {p['input']['shape']} -> "
               f"output dims {p['output']['dims']} shape {p['output']['shape']}")
    if p["free_dims"]:
        src.append(f"    free (run-time sized) dims: {p['free_dims']}")
    for k, w in enumerate(p["weights"]):
        src.append(f"    w{k}: dims {w['dims']} shape {w['shape']}")
    src.append('    """')
    src.append("")
    src.append("    def __init__(self):")
    src.append("        super().__init__()")
    for k, w in enumerate(p["weights"]):
        shape = ", ".join(str(s) for s in w["shape"])
        src.append(f"        self.w{k} = torch.nn.Parameter(torch.empty({shape}))  # dims {w['dims']}")
    src.append("        self.reset_parameters()")
    src.append("")
    src.append("    def reset_parameters(self):")
    if not p["weights"]:
        src.append("        pass")
    for k, w in enumerate(p["weights"]):
        fan_in = w.get("fan_in")
        if fan_in is None:  # not expected from the native core; fall back to conv's convention
            fan_in = _prod(w["shape"][1:])
        fan_in = max(float(fan_in), 1.0)
        std = math.sqrt(2.0 / fan_in)
        src.append(f"        torch.nn.init.normal_(self.w{k}, 0.0, {std!r})  # sqrt(2 / fan_in), fan_in = {fan_in}")
    src.append("")
    src.append("    def forward(self, x):")
    src.append(f"        # T dims {p['input']['dims']}")
    src.append("        t = x")
    for line in gen.lines:
        src.append("        " + line)
    src.append("        return t")
    return "\n".join(src) + "\n"


_counter = 0


def build_module(program: dict, class_name: str = "SynoOperator"):
    """Execute ``program_to_source(program, class_name)`` in a fresh namespace and instantiate the class."""
    global _counter
    source = program_to_source(program, class_name)
    _counter += 1
    filename = f"<syno_automl.codegen.torch:{class_name}:{_counter}>"
    # register the text so that tracebacks / inspect / torch.compile can show the generated lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    # a real module in sys.modules: torch.compile resolves the globals (torch, F) of a forward it inlines (the
    # operator inside a bigger model) by importing the function's __module__
    name = f"syno_generated_{_counter}"
    namespace = types.ModuleType(name)
    sys.modules[name] = namespace
    exec(compile(source, filename, "exec"), namespace.__dict__)
    return getattr(namespace, class_name)()
