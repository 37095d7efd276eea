"""Contract steps of the PyTorch generator: one ``torch.mm`` / ``torch.bmm`` (or a broadcast ``*``), and
unfold + contract as one ``F.conv1d``, unfold + unfold + contract as one ``F.conv2d``.

Never ``torch.einsum``: for some shapes its bmm path gets operands with batch stride 1 and clones them per
batch (seconds instead of milliseconds). Letters (dims after the rename; T's broadcast dims left out) form four
groups: B = T & w & out (batch), M = T & out - w, N = w & out - T, K = T & w - out (summed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

from syno_automl.ir import ContractInfo, State, Transition
from syno_automl.ir.program import Unfold

__all__ = ["emit_contract", "emit_conv", "Emitter"]


class Emitter(Protocol):
    """What a contract step needs of the generator (torch_steps.TorchGen has it): the emitted lines, the current
    dims and their sizes. A protocol, so that this module and torch_steps do not import each other."""

    dims: list[int]
    virtual: set[int]
    free: set[int]   # the run-time sized dims

    def emit(self, line: str) -> None: ...
    def size(self, d: int) -> int: ...
    def group_size(self, ds: Iterable[int]) -> str: ...
    def weight_name(self, k: int) -> str: ...
    def phys(self) -> list[int]: ...
    def ppos(self, d: int) -> int: ...
    def set_state(self, state: State) -> None: ...
    def describe(self) -> str: ...


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


def _factor(gen: Emitter, c: ContractInfo) -> int:
    """T's summed broadcast dims that the weight does not provide: a constant factor, not a loop."""
    return math.prod(gen.size(d) for d in c.factor_dims)


def emit_contract(gen: Emitter, c: ContractInfo) -> None:
    """``t = einsum(t, w_k) -> out`` as explicit view/copy ops and one bmm / mm / broadcast product."""
    gen.dims, gen.virtual = list(c.renamed.dims), set(c.renamed.bcast)
    out = [d for d in c.out if d not in c.still_bcast]
    factor = _factor(gen, c)
    wdims = list(c.weight.dims)
    tphys = gen.phys()
    wset, oset = set(wdims), set(out)
    # a letter summed from one operand only is summed first. The IR sums bare reductions (REDUCE steps) before
    # contract steps, so normally there is none; kept for generality (and weights' dims not in T).
    t_only = [d for d in tphys if d not in wset and d not in oset]
    if t_only:
        gen.emit(f"t = t.sum({_tuple(gen.ppos(d) for d in t_only)})  # summed from T only: {t_only}")
        tphys = [d for d in tphys if d not in t_only]
    tset = set(tphys)
    w = gen.weight_name(c.k)
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
        tv = _permuted("t", tphys, [d for d in out if d in tset]) + _unsqueezed(out, tset)
        wv = _permuted(w, wdims, [d for d in out if d in wset]) + _unsqueezed(out, set(wdims))
        gen.emit(f"t = {tv} * {wv}{fac}  # no summed letter: B {bat} M {mm} N {nn}{fac_note}")
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
    w_layout = "NK" if wdims == bat + nn + kk and wdims != bat + kk + nn else "KN"
    w_order = bat + (kk + nn if w_layout == "KN" else nn + kk)
    # the product: [B, M, N] = T @ W, or [B, N, M] = W @ T when that is out's order
    swap = bat + nn + mm == out and bat + mm + nn != out
    res = bat + (nn + mm if swap else mm + nn)

    free_m = [d for d in mm if d in gen.free]
    if len(free_m) > 1:  # several run-time sized dims: keep their sizes for the reshape back
        for d in free_m:
            gen.emit(f"size_{d} = t.shape[{tphys.index(d)}]")

    nb = [gen.group_size(bat)] if bat else []
    t_shape = nb + [gen.group_size(mm if t_layout == "MK" else kk), gen.group_size(kk if t_layout == "MK" else mm)]
    w_shape = nb + [gen.group_size(kk if w_layout == "KN" else nn), gen.group_size(nn if w_layout == "KN" else kk)]
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
    if t_layout != ("KM" if swap else "MK"):
        tv += ".transpose(-2, -1)"
    if w_layout != ("NK" if swap else "KN"):
        wv += ".transpose(-2, -1)"
    fn = "torch.bmm" if bat else "torch.mm"
    args = f"{wv}, {tv}" if swap else f"{tv}, {wv}"
    gen.emit(f"t = {fn}({args}){fac}  # B {bat} M {mm} N {nn} K {kk}{fac_note}")
    sizes = []
    for d in res:
        if d in gen.free:
            sizes.append("-1" if len(free_m) == 1 else f"size_{d}")
        else:
            sizes.append(str(gen.size(d)))
    groups = ([bat] if bat else []) + ([nn, mm] if swap else [mm, nn])
    if any(len(g) != 1 for g in groups):
        gen.emit(f"t = t.reshape({', '.join(sizes)})" if sizes else "t = t.reshape(())")
    if res != out:
        gen.emit(f"t = t.permute({', '.join(str(res.index(d)) for d in out)})")


def emit_conv(gen: Emitter, trs: list[Transition]) -> bool:
    """unfold(s), contract -> one ``F.conv1d`` / ``F.conv2d`` on the tensor before the unfolds (one or two), when
    the contraction sums exactly the windows against the weight and keeps the main dims (the conv pattern: the
    unfolds' k//2 zero padding both sides is the conv's ``padding``, stride 1). Other letters: B (in T, w and out)
    are conv groups, K (summed) input channels per group, N output channels per group, M the conv's batch. The
    cost model (native/cost.cpp, ``conv``) takes the same steps for one convolution. Returns False (and emits
    nothing) when the steps do not have that form: the walker then emits them one by one."""
    *us, ct = trs
    unfolds: list[Transition[Unfold]] = us
    c = ct.contract
    assert c is not None  # advance resolves every contract step
    srcs = [u.step.src for u in unfolds]
    pre = gen.phys()
    if len(set(srcs)) != len(srcs) or any(s not in pre or s in gen.free for s in srcs):
        return False
    ren = dict(ct.step.rename)

    def r(d: int) -> int:
        return ren.get(d, d)

    out = [d for d in c.out if d not in c.still_bcast]
    wdims = list(c.weight.dims)
    tphys = list(c.renamed.stored)
    wset, oset, tset = set(wdims), set(out), set(tphys)
    if any(d not in wset and d not in oset for d in tphys) or any(d not in tset and d not in oset for d in wdims):
        return False  # a letter summed from one operand only: not this pattern
    # the spatial dims in T's order before the unfolds: (source, main, window, k)
    sp = sorted([(u.step.src, r(u.step.dst[0]), r(u.step.dst[1]), u.step.window) for u in unfolds],
                key=lambda u: pre.index(u[0]))
    if any(m not in oset or m in wset or w not in wset or w in oset for _, m, w, _ in sp):
        return False
    other = [d for d in pre if d not in srcs]  # T's other dims before the unfolds (renamed: r(d))
    bat = [d for d in other if r(d) in wset and r(d) in oset]
    mm = [d for d in other if r(d) in oset and r(d) not in wset]
    kk = [d for d in other if r(d) in wset and r(d) not in oset]
    nn = [d for d in out if d in wset and d not in tset]
    if len([d for d in mm if d in gen.free]) > 1:
        return False
    factor = _factor(gen, c)
    for tr in trs:
        gen.emit(f"# {tr.step.text()}")
    xv = _permuted("t", pre, mm + bat + kk + [u[0] for u in sp])
    if not (len(mm) == 1 and len(bat + kk) == 1):
        spatial = ", ".join(str(gen.size(u[0])) for u in sp)
        xv += f".reshape({gen.group_size(mm)}, {gen.group_size(bat + kk)}, {spatial})"
    wv = _permuted(gen.weight_name(c.k), wdims, [r(d) for d in bat] + nn + [r(d) for d in kk] + [u[2] for u in sp])
    if not (len(bat) + len(nn) == 1 and len(kk) == 1):
        wv += f".reshape({gen.group_size(bat + nn)}, {gen.group_size(kk)}, {', '.join(str(u[3]) for u in sp)})"
    groups = math.prod(gen.size(d) for d in bat)
    args = f"padding={_tuple(u[3] // 2 for u in sp)}" + (f", groups={groups}" if groups != 1 else "")
    fac = f" * {factor}  # sum over broadcast dims" if factor != 1 else ""
    gen.emit(f"t = F.conv{len(sp)}d({xv}, {wv}, {args}){fac}  # batch {[r(d) for d in mm]} groups "
             f"{[r(d) for d in bat]} in {[r(d) for d in kk]} out {nn} kernel {[u[2] for u in sp]}")
    res = [r(d) for d in mm + bat] + nn + [u[1] for u in sp]
    if not (len(mm) == 1 and len(bat) + len(nn) == 1):
        sizes = ["-1" if d in gen.free else str(gen.size(d)) for d in res]
        gen.emit(f"t = t.reshape({', '.join(sizes)})")
    if res != out:
        gen.emit(f"t = t.permute({', '.join(str(res.index(d)) for d in out)})")
    gen.set_state(ct.post)
    gen.emit(f"# T dims {gen.describe()}")
    return True
