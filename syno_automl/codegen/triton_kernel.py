"""The Triton kernel's source text for one program (codegen/triton_plan.py decides the tiling).

Per program ``(pid_m, pid_n, pid_b)`` the kernel owns one output tile of BM rows (M iterators, flattened, last
fastest) × BN columns (N iterators) at one value of the B iterators. It loops over K (every reduction,
flattened) in steps of BK; each step gathers an x tile ``[BM, BK]`` at ``x[e_x(i, r)]`` and a weight tile
``[BK, BN]`` at ``w[e_w(i, r)]`` with their offsets computed in registers from the index expressions
(codegen/triton_index.py; strides are arguments, so a channels-last x needs no copy), zero where a guard fails
(the load mask: UNFOLD's padding), and accumulates their product in fp32: ``tl.dot`` when N and K reach 16,
else a broadcast multiply and a sum over K; with no N iterator (a depthwise form) the weight is gathered per row
too, ``[BM, BK]``, and each row sums its x · w. The accumulator is fp32 (fp64 for fp64 data). The tile is
scaled (mean reductions) and stored once.
"""

from __future__ import annotations

import math

from syno_automl.codegen.triton_index import INT_MAX, index_code
from syno_automl.codegen.triton_plan import KernelPlan
from syno_automl.ir import Program

__all__ = ["kernel_source", "autotune_configs", "KERNEL_NAME", "LAUNCH_NAME"]

KERNEL_NAME = "syno_kernel"
LAUNCH_NAME = "syno_forward"
ELEMENTS = 16384  # the most elements of one broadcast product tile [BM, BK, BN] (registers)

# (BM, BN, BK, num_warps, num_stages) tried by triton.autotune for tl.dot kernels; clipped to the problem
DOT_CONFIGS = [(128, 64, 32, 4, 3), (64, 64, 32, 4, 3), (128, 128, 32, 8, 3), (64, 128, 32, 4, 3),
               (64, 32, 64, 4, 4), (32, 64, 64, 4, 4), (128, 32, 32, 4, 4), (256, 64, 32, 8, 3)]


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def autotune_configs(plan: KernelPlan) -> list[tuple[int, int, int, int, int]]:
    """The block sizes triton.autotune chooses among (first: the one the interpreter runs)."""
    n, k = _pow2(plan.n_size), _pow2(plan.k_size)
    out: list[tuple[int, int, int, int, int]] = []
    if plan.dot:
        for bm, bn, bk, warps, stages in DOT_CONFIGS:
            cfg = (bm, max(16, min(bn, n)), max(16, min(bk, k)), warps, stages)
            if cfg not in out:
                out.append(cfg)
        return out
    if plan.rowsum:  # tiles [BM, BK] of x and of w, no N: at most 4096 elements each (no register spills)
        bk = min(k, 32)
        for bm in (128, 64, 256, 32):
            if bm * bk <= ELEMENTS // 4:
                out.append((bm, 1, bk, 4 if bm <= 128 else 8, 2))
        return out or [(32, 1, bk, 4, 2)]
    bn = min(n, 64)
    bk = max(1, min(k, 32, ELEMENTS // (32 * bn)))
    for bm in (64, 128, 32, 256):
        if bm * bn * bk <= ELEMENTS:
            for warps in (4, 8) if bm >= 128 else (4, 2):
                out.append((bm, bn, bk, warps, 2))
    return out or [(16, bn, bk, 4, 2)]


def _group(lines: list[str], ind: str, group: tuple[int, ...], flat: str, sizes: tuple[int, ...], name) -> None:
    """``name(j) = ...`` for each member of ``group`` from the flat index ``flat`` (row-major, last fastest).
    Temporaries are named after ``flat`` (a name reused inside the K loop would be a loop-carried variable)."""
    if not group:
        return
    rest = flat
    for pos in range(len(group) - 1, 0, -1):
        j = group[pos]
        lines.append(f"{ind}{name(j)} = {rest} % {sizes[j]}")
        lines.append(f"{ind}{flat}_{pos} = {rest} // {sizes[j]}")
        rest = f"{flat}_{pos}"
    lines.append(f"{ind}{name(group[0])} = {rest}")


def kernel_source(p: Program, plan: KernelPlan) -> list[str]:
    """Lines of the kernel (``syno_kernel``, autotuned) and its launcher ``syno_forward(x, w0, precision)``."""
    assert p.expr is not None  # triton_support refuses programs without one
    ex = p.expr
    m, n, b = plan.m, plan.n, plan.b
    free = set(plan.free)

    def it_size(kind: str, j: int) -> int:
        if kind == "red":
            return plan.reductions[j]
        return INT_MAX + 1 if j in free else plan.iterators[j]

    def x_name(kind: str, j: int) -> str:
        return f"r{j}[None, :]" if kind == "red" else f"i{j}" if j in b else f"i{j}[:, None]"

    def w_name(kind: str, j: int) -> str:
        if plan.rowsum:  # gathered per row, as x
            return x_name(kind, j)
        return f"r{j}[:, None]" if kind == "red" else f"i{j}" if j in b else f"i{j}[None, :]"

    nx, nw, no = len(p.input.dims), len(p.weights[0].dims), len(p.output.dims)
    x_off, x_guards = index_code(ex.input, [f"sx{d}" for d in range(nx)], x_name, it_size)
    w_off, w_guards = index_code(ex.weights[0], [f"sw{d}" for d in range(nw)], w_name, it_size)
    row = "" if plan.rowsum else "[:, None]"
    out_terms = [f"i{j}{row} * so{j}" if j in m else f"i{j}[None, :] * so{j}" if j in n else f"i{j} * so{j}"
                 for j in range(no)]
    k_total, n_total, b_total = plan.k_size, plan.n_size, plan.b_size
    args = ["x_ptr", "w_ptr", "out_ptr", "M"] + [f"sx{d}" for d in range(nx)] + [f"sw{d}" for d in range(nw)] + \
        [f"so{d}" for d in range(no)]
    L: list[str] = []
    L.append("_CONFIGS = [")
    for bm, bn, bk, warps, stages in autotune_configs(plan):
        L.append(f"    triton.Config({{'BM': {bm}, 'BN': {bn}, 'BK': {bk}}}, num_warps={warps}, num_stages={stages}),")
    L.append("]")
    L.append('if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot time configs: run the first')
    L.append("    _CONFIGS = _CONFIGS[:1]")
    L.append("")
    L.append("")
    L.append("@triton.autotune(configs=_CONFIGS, key=['M'])")
    L.append("@triton.jit")
    L.append(f"def {KERNEL_NAME}({', '.join(args)},")
    L.append("                PRECISION: tl.constexpr, ACC: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, "
             "BK: tl.constexpr):")
    L.append(f'    """out[i] = {plan.scale!r} * sum_r x[e_x(i, r)] * w[e_w(i, r)]: M iterators {list(m)} (rows), '
             f'N {list(n)} (columns), B {list(b)} (programs), K reductions {list(range(len(plan.reductions)))}."""')
    L.append("    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)")
    L.append("    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)")
    L.append("    pid_b = tl.program_id(2)")
    ind = "    "
    _group(L, ind, m, "offs_m", plan.iterators, lambda j: f"i{j}")
    _group(L, ind, n, "offs_n", plan.iterators, lambda j: f"i{j}")
    _group(L, ind, b, "pid_b", plan.iterators, lambda j: f"i{j}")
    L.append("    m_ok = offs_m < M")
    L.append(f"    n_ok = offs_n < {n_total}")
    tile = "(BM,)" if plan.rowsum else "(BM, BN)"
    L.append(f"    acc = tl.zeros({tile}, dtype=ACC)")
    L.append(f"    for k0 in range(0, {k_total}, BK):")
    ind = "        "
    L.append(f"{ind}offs_k = k0 + tl.arange(0, BK)")
    _group(L, ind, tuple(range(len(plan.reductions))), "offs_k", plan.reductions, lambda j: f"r{j}")
    L.append(f"{ind}k_ok = offs_k < {k_total}")
    L.append(f"{ind}x_mask = {' & '.join(['m_ok[:, None] & k_ok[None, :]'] + x_guards)}")
    w_base, w_tile = ("m_ok[:, None] & k_ok[None, :]", "(BM, BK)") if plan.rowsum else \
        ("k_ok[:, None] & n_ok[None, :]", "(BK, BN)")
    L.append(f"{ind}w_mask = {' & '.join([w_base] + w_guards)}")
    L.append(f"{ind}x_off = tl.zeros((BM, BK), dtype=tl.int32) + {x_off}")
    L.append(f"{ind}w_off = tl.zeros({w_tile}, dtype=tl.int32) + {w_off}")
    L.append(f"{ind}a = tl.load(x_ptr + x_off, mask=x_mask, other=0.0)")
    L.append(f"{ind}b = tl.load(w_ptr + w_off, mask=w_mask, other=0.0)")
    if plan.rowsum:
        L.append(f"{ind}acc += tl.sum(a.to(ACC) * b.to(ACC), axis=1)")
    elif plan.dot:
        L.append(f"{ind}acc += tl.dot(a, b, input_precision=PRECISION, out_dtype=ACC)")
    else:
        L.append(f"{ind}acc += tl.sum(a.to(ACC)[:, :, None] * b.to(ACC)[None, :, :], axis=1)")
    L.append(f"    out_off = tl.zeros({tile}, dtype=tl.int32) + {' + '.join(out_terms) if out_terms else '0'}")
    scale = "" if plan.scale == 1.0 else f" * {plan.scale!r}"
    mask = "m_ok" if plan.rowsum else "m_ok[:, None] & n_ok[None, :]"
    L.append(f"    tl.store(out_ptr + out_off, (acc{scale}).to(out_ptr.dtype.element_ty), mask={mask})")
    L += ["", ""] + _launcher(p, plan, n_total, b_total)
    return L


def _launcher(p: Program, plan: KernelPlan, n_total: int, b_total: int) -> list[str]:
    in_dims = list(p.input.dims)
    out_shape = []
    for j, (d, s) in enumerate(zip(p.output.dims, p.output.shape)):
        out_shape.append(f"x.shape[{in_dims.index(d)}]" if j in plan.free else str(s))
    fixed_m = math.prod(plan.iterators[j] for j in plan.m if j not in plan.free)
    m_expr = " * ".join([f"x.shape[{in_dims.index(p.output.dims[j])}]" for j in plan.free] + [str(fixed_m)])
    want = [None if d in p.free_dims else s for d, s in zip(p.input.dims, p.input.shape)]
    L = [f"def {LAUNCH_NAME}(x, w0, precision='ieee'):",
         '    """The kernel on (x, w0): out in x\'s dtype; precision: tl.dot\'s input_precision for fp32."""',
         f"    want = {want!r}  # None: run-time sized",
         "    if x.dim() != len(want) or any(s is not None and s != n for s, n in zip(want, x.shape)):",
         "        raise ValueError(f'x has shape {tuple(x.shape)}, expected {want} (None: any size)')",
         f"    if tuple(w0.shape) != {tuple(p.weights[0].shape)!r}:",
         f"        raise ValueError(f'w0 has shape {{tuple(w0.shape)}}, expected {tuple(p.weights[0].shape)!r}')",
         "    w0 = w0.to(x.dtype)",
         f"    out = torch.empty(({', '.join(out_shape)}{',' if len(out_shape) == 1 else ''}), "
         "device=x.device, dtype=x.dtype)",
         f"    M = {m_expr}",
         "    if out.numel() == 0:",
         "        return out",
         f"    grid = lambda meta: (triton.cdiv(M, meta['BM']), triton.cdiv({n_total}, meta['BN']), {b_total})",
         f"    {KERNEL_NAME}[grid](x, w0, out, M, *x.stride(), *w0.stride(), *out.stride(), PRECISION=precision,",
         "                         ACC=tl.float64 if x.dtype == torch.float64 else tl.float32)",
         "    return out"]
    return L
