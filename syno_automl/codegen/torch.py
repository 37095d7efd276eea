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
* ``stride``   -> ``t[:, ..., ::s]``: ``out[e] = in[e * s]``; ``shift`` then ``stride`` of the shifted dim by
  s >= 2 -> one offset slice ``t[:, ..., 1::s]`` (no roll: ``(f * s + 1) mod n = f * s + 1``)
* ``unfold``   -> ``F.pad`` (k//2 zeros both sides) + ``t.unfold(p, k, 1)`` + ``movedim`` so the window dim
  sits right after the main dim: ``out[m, w] = in[m + w - k//2]`` (0 outside)
* ``expand``   -> nothing at first: the dim is *virtual* (broadcast, not stored). It stays virtual through
  shift/stride/split (a broadcast dim is invariant under them) and through contractions (it is simply left
  out of T's operand; a virtual dim summed by the contraction and not provided by the weight becomes a
  constant factor). It is materialized (``unsqueeze`` + ``expand``, still a view) only when a merge with a
  stored dim, an unfold (zero padding makes it non-constant) or the final output needs it.
* ``reduce``   -> ``t.sum(p)`` / ``t.mean(p)`` (on a virtual dim: ``* n`` / nothing)
* ``contract`` -> never ``torch.einsum`` (for some shapes its bmm path gets operands with batch stride 1 and
  clones them per batch: seconds instead of milliseconds). Letters (dims after the rename; T's virtual dims
  left out) form four groups: B = T & w & out (batch), M = T & out - w, N = w & out - T, K = T & w - out
  (summed). A letter summed from one operand only is summed first (``t.sum`` / ``w.sum``; the IR sums bare
  reductions before contract steps, so normally there is none). With K empty the step is a broadcast
  elementwise product (``t.permute(..)[.., None, ..] * w.permute(..)[None, ..]``, laid out in out's order);
  otherwise T is ``permute``d to (B, M, K) or (B, K, M) (none when already so), ``reshape``d to 3-D (2-D
  without B) and made ``contiguous``, the weight likewise to (B, K, N) or (B, N, K), and one ``torch.bmm``
  (``torch.mm``) yields (B, M, N) -- or (B, N, M) = W @ T when that is out's order -- which is ``reshape``d to
  its dims and ``permute``d to out. A transposed operand is passed as a ``transpose(-2, -1)`` view (BLAS takes
  either inner layout). Free dims can only be in M (weights have none): M's size is ``-1`` in the reshapes
  (with several free dims in M, their run-time sizes are read from ``t.shape`` first).
  unfold + unfold + contract (adjacent steps) where the contraction sums both windows against the weight and
  keeps both main dims (the conv pattern) -> one ``F.conv2d`` on the tensor *before* the unfolds (the unfolds'
  k//2 zero padding is conv2d's ``padding``; B letters are conv ``groups``, K input channels, N output
  channels, M the conv batch): no im2col copy. Same function (the float summation order differs).
* end          -> materialize what is still virtual, ``permute`` to ``output.dims``

Dims listed in ``program.get("free_dims", [])`` may have any size at run time (e.g. the batch dim): the
generated code never bakes their size in (``-1`` / shape-free view ops are used), so the module works for
any size of them and exports with a dynamic dim.
"""

from __future__ import annotations

import linecache
import math
import sys
import types
from typing import Any

__all__ = ["program_to_source", "build_module", "count_flops", "normalize_program"]


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
        k, out_phys, factor, still_virtual = self._contract_prologue(st)
        self._contract(k, self.p["weights"][k]["dims"], out_phys, factor)
        self.dims = list(st["out"])
        self.virtual = set(still_virtual)

    def _contract_prologue(self, st: dict):
        """Validate a contract step and rename T's dims; return (k, out without T's broadcast dims that stay
        broadcast, the constant factor of T's summed broadcast dims, the dims that stay broadcast)."""
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
        wdims = list(weights[k]["dims"])
        if len(set(wdims)) != len(wdims) or len(set(out)) != len(out):
            raise ValueError("contract: duplicate dims in weight or out")
        for d in wdims:
            if d in self.free:
                raise ValueError(f"weight {k} has free (run-time sized) dim {d}")
        tvirt = [d for d in self.dims if d in self.virtual]
        for d in out:
            if d not in self.dims and d not in wdims:
                raise ValueError(f"contract: out dim {d} is in neither T {self.dims} nor w{k} {wdims}")
        # a broadcast dim of T that the weight does not provide stays broadcast in the result; one that is
        # summed (not in out) and not provided by the weight is a constant factor; one that the weight provides
        # is simply left out of T's operand (T is constant along it)
        still_virtual = [d for d in out if d in self.virtual and d not in wdims]
        out_phys = [d for d in out if d not in still_virtual]
        factor = _prod(_size(self.sizes, d) for d in tvirt if d not in wdims and d not in out)
        return k, out_phys, factor, still_virtual

    def shift_stride(self, sh: dict, st: dict) -> bool:
        """shift d -> e then stride e -> f by s >= 2: ``out[f] = in[(f * s + 1) mod n] = in[f * s + 1]`` (f * s + 1
        <= n - s + 1 < n), one offset slice ``t[..., 1::s]`` (a view) instead of a roll that copies T. Returns
        False (and emits nothing) when the steps do not have that form."""
        d, e, s = sh["src"], sh["dst"], int(st["stride"])
        if st["src"] != e or s < 2 or d not in self.dims or d in self.virtual:
            return False
        self.emit(f"# {_step_text(sh)}")
        self.emit(f"# {_step_text(st)}")
        self.op_shift_checks(d, e)
        f = st["dst"]
        if f != e:
            self.fresh(f)
        if _size(self.sizes, f) * s != _size(self.sizes, e):
            raise ValueError(f"stride {e} -> {f} by {s}: |{e}| = {_size(self.sizes, e)} != {_size(self.sizes, f)} * {s}")
        p = self.ppos(d)
        self.emit(f"t = t[{':, ' * p}1::{s}]  # roll by -1 then stride: out[f] = in[f * {s} + 1]")
        self.rename(d, f)
        self.emit(f"# T dims {self.describe()}")
        return True

    def op_shift_checks(self, d: int, e: int) -> None:
        self.need(d)
        if e != d:
            self.fresh(e)
        if _size(self.sizes, d) != _size(self.sizes, e):
            raise ValueError(f"shift {d} -> {e}: sizes differ")

    def conv_steps(self, u1: dict, u2: dict, c: dict) -> bool:
        """unfold, unfold, contract -> one ``F.conv2d`` on the tensor before the unfolds, when the contraction
        sums exactly both windows against the weight and keeps both main dims (the conv pattern: the unfolds'
        k//2 zero padding both sides is conv2d's ``padding``, stride 1). Other letters: B (in T, w and out) are
        conv groups, K (summed) input channels per group, N output channels per group, M the conv's batch.
        Returns False (and emits nothing) when the steps do not have that form."""
        s1, s2 = u1["src"], u2["src"]
        pre = self.phys()
        if s1 not in pre or s2 not in pre or s1 == s2 or s1 in self.free or s2 in self.free:
            return False
        snapshot = (list(self.dims), set(self.virtual), len(self.lines))

        def restore() -> bool:
            self.dims, self.virtual = snapshot[0], snapshot[1]
            del self.lines[snapshot[2]:]
            return False

        try:
            self.op_unfold(u1)
            self.op_unfold(u2)
            k, out, factor, still_virtual = self._contract_prologue(c)
        except ValueError:  # the ordinary path reports it
            return restore()
        ren = c["rename"]
        r = lambda d: ren.get(d, d)  # noqa: E731
        wdims = list(self.p["weights"][k]["dims"])
        tphys = self.phys()
        wset, oset, tset = set(wdims), set(out), set(tphys)
        if any(d not in wset and d not in oset for d in tphys) or any(d not in tset and d not in oset for d in wdims):
            return restore()  # a letter summed from one operand only: not this pattern
        # the two spatial dims in T's order before the unfolds: (source, main, window, k)
        sp = sorted([(s1, r(u1["dst"][0]), r(u1["dst"][1]), int(u1["window"])),
                     (s2, r(u2["dst"][0]), r(u2["dst"][1]), int(u2["window"]))], key=lambda u: pre.index(u[0]))
        if any(m not in oset or m in wset or w not in wset or w in oset for _, m, w, _ in sp):
            return restore()
        other = [d for d in pre if d not in (s1, s2)]  # T's other dims before the unfolds (renamed: r(d))
        bat = [d for d in other if r(d) in wset and r(d) in oset]
        mm = [d for d in other if r(d) in oset and r(d) not in wset]
        kk = [d for d in other if r(d) in wset and r(d) not in oset]
        nn = [d for d in out if d in wset and d not in tset]
        free_m = [d for d in mm if d in self.free]
        if len(free_m) > 1:
            return restore()
        del self.lines[snapshot[2]:]

        def size(ds: list[int]) -> str:
            return "-1" if any(d in self.free for d in ds) else str(_prod(_size(self.sizes, d) for d in ds))

        for st in (u1, u2, c):
            self.emit(f"# {_step_text(st)}")
        order = mm + bat + kk + [sp[0][0], sp[1][0]]
        xv = _permuted("t", pre, order)
        if not (len(mm) == 1 and len(bat + kk) == 1):
            spatial = f"{_size(self.sizes, sp[0][0])}, {_size(self.sizes, sp[1][0])}"
            xv += f".reshape({size(mm)}, {size(bat + kk)}, {spatial})"
        w_order = [r(d) for d in bat] + nn + [r(d) for d in kk] + [sp[0][2], sp[1][2]]
        wv = _permuted(f"self.w{k}", wdims, w_order)
        if not (len(bat) + len(nn) == 1 and len(kk) == 1):
            wv += f".reshape({size(bat + nn)}, {size(kk)}, {sp[0][3]}, {sp[1][3]})"
        groups = _prod(_size(self.sizes, d) for d in bat)
        args = f"padding=({sp[0][3] // 2}, {sp[1][3] // 2})" + (f", groups={groups}" if groups != 1 else "")
        fac = f" * {factor}  # sum over broadcast dims" if factor != 1 else ""
        self.emit(f"t = F.conv2d({xv}, {wv}, {args}){fac}  # batch {[r(d) for d in mm]} groups "
                  f"{[r(d) for d in bat]} in {[r(d) for d in kk]} out {nn} kernel {[sp[0][2], sp[1][2]]}")
        res = [r(d) for d in mm + bat] + nn + [sp[0][1], sp[1][1]]
        if not (len(mm) == 1 and len(bat) + len(nn) == 1):
            sizes = ["-1" if d in self.free else str(_size(self.sizes, d)) for d in res]
            self.emit(f"t = t.reshape({', '.join(sizes)})")
        if res != out:
            self.emit(f"t = t.permute({', '.join(str(res.index(d)) for d in out)})")
        self.dims = list(c["out"])
        self.virtual = set(still_virtual)
        self.emit(f"# T dims {self.describe()}")
        return True

    def _contract(self, k: int, wdims: list[int], out: list[int], factor: int) -> None:
        """Emit ``t = einsum(t, w_k) -> out`` (T's stored dims, w_k's dims, ``out`` without T's broadcast dims)
        as explicit view/copy ops and one ``torch.bmm`` / ``torch.mm`` (or a broadcast ``*`` when nothing is
        summed), never ``torch.einsum`` (whose bmm path may get operands with batch stride 1 and clone them per
        batch). Letters: B = T & W & out (batch), M = T & out - W, N = W & out - T, K = T & W - out (summed)."""
        tphys = self.phys()
        wset, oset = set(wdims), set(out)
        # a letter summed from one operand only is summed first. The IR sums bare reductions (REDUCE steps) before
        # contract steps, so normally there is none; kept for generality (and weights' dims not in T).
        t_only = [d for d in tphys if d not in wset and d not in oset]
        if t_only:
            self.emit(f"t = t.sum({_tuple(self.ppos(d) for d in t_only)})  # summed from T only: {t_only}")
            tphys = [d for d in tphys if d not in t_only]
        tset = set(tphys)
        w = f"self.w{k}"
        w_only = [d for d in wdims if d not in tset and d not in oset]
        if w_only:
            w = f"{w}.sum({_tuple(wdims.index(d) for d in w_only)})"
            wdims = [d for d in wdims if d not in w_only]
        bat = [d for d in out if d in tset and d in wset]   # B, M, N in out order
        mm = [d for d in out if d in tset and d not in wset]
        nn = [d for d in out if d in wset and d not in tset]
        kk = [d for d in tphys if d in wset and d not in oset]  # K in T's order (T is the big operand)
        fac = f" * {factor}" if factor != 1 else ""
        fac_note = "  # sum over broadcast dims" if factor != 1 else ""
        if not kk:
            # nothing summed over both operands: a broadcast product, laid out in out's order
            tv = _permuted("t", tphys, [d for d in out if d in tset])
            wv = _permuted(w, wdims, [d for d in out if d in wset])
            tv += _unsqueezed(out, tset)
            wv += _unsqueezed(out, set(wdims))
            self.emit(f"t = {tv} * {wv}{fac}  # no summed letter: B {bat} M {mm} N {nn}{fac_note}")
            return
        # T's side: use T's stored order as is when it is already B M K or B K M (a view if t is contiguous)
        b_t = [d for d in tphys if d in bat]
        m_t = [d for d in tphys if d in mm]
        if tphys == b_t + m_t + kk:
            bat, mm, t_layout = b_t, m_t, "MK"
        elif tphys == b_t + kk + m_t:
            bat, mm, t_layout = b_t, m_t, "KM"
        else:
            t_layout = "MK"  # B and M in out's order: the result then often needs no permute
        t_order = bat + (mm + kk if t_layout == "MK" else kk + mm)
        # W's side (small): as stored when it is B K N or B N K, else permuted to B K N
        if wdims == bat + kk + nn:
            w_layout = "KN"
        elif wdims == bat + nn + kk:
            w_layout = "NK"
        else:
            w_layout = "KN"
        w_order = bat + (kk + nn if w_layout == "KN" else nn + kk)
        # the product: [B, M, N] = T @ W, or [B, N, M] = W @ T when that is out's order
        swap = bat + nn + mm == out and bat + mm + nn != out
        res = bat + (nn + mm if swap else mm + nn)

        free_m = [d for d in mm if d in self.free]
        if len(free_m) > 1:  # several run-time sized dims: keep their sizes for the reshape back
            for d in free_m:
                self.emit(f"size_{d} = t.shape[{tphys.index(d)}]")

        def group(ds: list[int]) -> str:
            if any(d in self.free for d in ds):
                return "-1"
            return str(_prod(_size(self.sizes, d) for d in ds))

        nb = [group(bat)] if bat else []
        t_shape = nb + [group(mm if t_layout == "MK" else kk), group(kk if t_layout == "MK" else mm)]
        w_shape = nb + [group(kk if w_layout == "KN" else nn), group(nn if w_layout == "KN" else kk)]
        t_groups = ([bat] if bat else []) + ([mm, kk] if t_layout == "MK" else [kk, mm])
        w_groups = ([bat] if bat else []) + ([kk, nn] if w_layout == "KN" else [nn, kk])
        # contiguous operands (batch stride largest, one inner stride 1): a transposed view is fine for bmm
        tv = _permuted("t", tphys, t_order)
        if any(len(g) != 1 for g in t_groups):
            tv += f".reshape({', '.join(t_shape)})"
        tv += ".contiguous()"
        wv = _permuted(w, wdims, w_order)
        if any(len(g) != 1 for g in w_groups):
            wv += f".reshape({', '.join(w_shape)})"
        if w_order != wdims:
            wv += ".contiguous()"
        # operands of the product: left [B, M, K] / right [B, K, N] (or W left, T right when swapped)
        t_need = "KM" if swap else "MK"
        w_need = "NK" if swap else "KN"
        if t_layout != t_need:
            tv += ".transpose(-2, -1)"
        if w_layout != w_need:
            wv += ".transpose(-2, -1)"
        fn = "torch.bmm" if bat else "torch.mm"
        args = f"{wv}, {tv}" if swap else f"{tv}, {wv}"
        self.emit(f"t = {fn}({args}){fac}  # B {bat} M {mm} N {nn} K {kk}{fac_note}")
        sizes = []
        for d in res:
            if d in self.free:
                sizes.append("-1" if len(free_m) == 1 else f"size_{d}")
            else:
                sizes.append(str(_size(self.sizes, d)))
        groups = ([bat] if bat else []) + ([nn, mm] if swap else [mm, nn])
        if any(len(g) != 1 for g in groups):
            self.emit(f"t = t.reshape({', '.join(sizes)})" if sizes else "t = t.reshape(())")
        if res != out:
            self.emit(f"t = t.permute({', '.join(str(res.index(d)) for d in out)})")

    def finish(self) -> None:
        out = self.p["output"]["dims"]
        if sorted(out) != sorted(self.dims):
            raise ValueError(f"after the last step T has dims {self.dims}, output wants {out}")
        self.materialize(list(self.virtual))
        phys = self.phys()
        if phys != out:
            self.emit(f"t = t.permute({', '.join(str(phys.index(d)) for d in out)})")


def _tuple(values) -> str:
    values = [str(v) for v in values]
    return "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"


def _permuted(expr: str, dims: list[int], order: list[int]) -> str:
    """``expr`` (a tensor with dims ``dims``) permuted to ``order`` (nothing when it is already)."""
    if order == dims:
        return expr
    return f"{expr}.permute({', '.join(str(dims.index(d)) for d in order)})"


def _unsqueezed(out: list[int], have: set[int]) -> str:
    """Indexing that inserts size-1 dims where ``out`` has a dim not in ``have`` (so it broadcasts to out)."""
    if all(d in have for d in out):
        return ""
    idx = [":" if d in have else "None" for d in out]
    while idx and idx[-1] == ":":
        idx.pop()
    return "[" + ", ".join(idx) + "]"


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
    steps = p["steps"]
    i = 0
    while i < len(steps):
        if [st["op"] for st in steps[i:i + 3]] == ["unfold", "unfold", "contract"] and gen.conv_steps(*steps[i:i + 3]):
            i += 3
            continue
        if [st["op"] for st in steps[i:i + 2]] == ["shift", "stride"] and gen.shift_stride(*steps[i:i + 2]):
            i += 2
            continue
        gen.step(steps[i])
        i += 1
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
