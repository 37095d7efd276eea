"""TVM code generation (syno_automl.codegen.tvm) and latency measurement (syno_automl.measure).

All programs here are hand-written kernel-IR dicts (docs/architecture.md §2), independent of the native
core.  Every program goes through a JSON round trip first, so int dict keys arrive as strings, as they do
from a stored operator.  The MetaSchedule, RPC and torch.compile tests are marked ``slow``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from _rpc_helpers import rpc_tracker_fixture  # noqa: E402

from syno_automl import measure as lat  # noqa: E402
from syno_automl.codegen import tvm as cg  # noqa: E402
from syno_automl.measure.database import records_for  # noqa: E402

pytestmark = pytest.mark.tvm
F = torch.nn.functional
RTOL = 1e-4
# a short variant of the protocol, to keep the suite fast (the real one is lat.PROTOCOL)
QUICK = lat.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
UNTUNED = lat.MeasureRequest(protocol=QUICK)  # TVM's default schedules, the quick protocol


def _json(program: dict) -> dict:
    return json.loads(json.dumps(program))


def _close(got, ref, rtol=RTOL):
    ref = np.asarray(ref)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape).astype("float32")


# ------------------------------------------------------------------------------------------------
# hand-written programs
# ------------------------------------------------------------------------------------------------


def conv2d_program(N=2, C_in=3, C_out=4, H=5, W=5, k=3, stride=1):
    """conv2d NCHW, zero padding k//2, via two UNFOLDs (+ STRIDEs) and one contraction.
    With the defaults this is exactly the example of the brief (dims 0..12, w0 = (C_out, C_in, kh, kw))."""
    h = k // 2
    Ho, Wo = -(-H // stride), -(-W // stride)
    sizes = {0: N, 1: C_in, 2: H, 3: W, 4: H, 5: k, 6: W, 7: k, 9: C_out, 10: C_in, 11: k, 12: k}
    steps = [
        {"op": "unfold", "src": 2, "dst": [4, 5], "window": k},
        {"op": "unfold", "src": 3, "dst": [6, 7], "window": k},
    ]
    out_h, out_w = 4, 6
    if stride > 1:
        sizes.update({13: Ho, 14: Wo})
        steps += [
            {"op": "stride", "src": 4, "dst": 13, "stride": stride},
            {"op": "stride", "src": 6, "dst": 14, "stride": stride},
        ]
        out_h, out_w = 13, 14

    def pos(it, red, n):
        base = ["it", it] if stride == 1 else ["mul", ["it", it], stride]
        return ["pad", ["sub", ["add", base, ["red", red]], ["const", h]], n]

    steps.append({"op": "contract", "weight": 0, "rename": {1: 10, 5: 11, 7: 12}, "out": [0, 9, out_h, out_w]})
    return _json(
        {
            "input": {"dims": [0, 1, 2, 3], "shape": [N, C_in, H, W]},
            "weights": [{"dims": [9, 10, 11, 12], "shape": [C_out, C_in, k, k], "fan_in": C_in * k * k}],
            "output": {"dims": [0, 9, out_h, out_w], "shape": [N, C_out, Ho, Wo]},
            "sizes": sizes,
            "steps": steps,
            "flops": 2 * N * C_out * Ho * Wo * C_in * k * k,
            "params": C_out * C_in * k * k,
            "expr": {
                "iterators": [N, C_out, Ho, Wo],
                "reductions": [C_in, k, k],
                "mean": [False] * 3,
                "input": [["it", 0], ["red", 0], pos(2, 1, H), pos(3, 2, W)],
                "weights": [[["it", 1], ["red", 0], ["red", 1], ["red", 2]]],
            },
        }
    )


def linear_program(N=4, C_in=8, C_out=6):
    return _json(
        {
            "input": {"dims": [0, 1], "shape": [N, C_in]},
            "weights": [{"dims": [2, 3], "shape": [C_out, C_in], "fan_in": C_in}],
            "output": {"dims": [0, 2], "shape": [N, C_out]},
            "sizes": {0: N, 1: C_in, 2: C_out, 3: C_in},
            "steps": [{"op": "contract", "weight": 0, "rename": {1: 3}, "out": [0, 2]}],
            "expr": {
                "iterators": [N, C_out],
                "reductions": [C_in],
                "mean": [False],
                "input": [["it", 0], ["red", 0]],
                "weights": [[["it", 1], ["red", 0]]],
            },
        }
    )


def avgpool_program(N=2, C=3, H=4, W=6, p=2):
    """2-D average pooling p x p: SPLIT each spatial dim, then mean-REDUCE the inner parts."""
    return _json(
        {
            "input": {"dims": [0, 1, 2, 3], "shape": [N, C, H, W]},
            "weights": [],
            "output": {"dims": [0, 1, 4, 6], "shape": [N, C, H // p, W // p]},
            "sizes": {0: N, 1: C, 2: H, 3: W, 4: H // p, 5: p, 6: W // p, 7: p},
            "steps": [
                {"op": "split", "src": 2, "dst": [4, 5]},
                {"op": "split", "src": 3, "dst": [6, 7]},
                {"op": "reduce", "src": 5, "mean": True},
                {"op": "reduce", "src": 7, "mean": True},
            ],
            "expr": {
                "iterators": [N, C, H // p, W // p],
                "reductions": [p, p],
                "mean": [True, True],
                "input": [
                    ["it", 0],
                    ["it", 1],
                    ["add", ["mul", ["it", 2], p], ["red", 0]],
                    ["add", ["mul", ["it", 3], p], ["red", 1]],
                ],
                "weights": [],
            },
        }
    )


def shift_stride_program(N=2, L=12, s=2, k=3):
    """1-D: STRIDE 2, SHIFT (roll by -1), UNFOLD window 3, then a contraction with a length-3 filter."""
    n = L // s
    return _json(
        {
            "input": {"dims": [0, 1], "shape": [N, L]},
            "weights": [{"dims": [5], "shape": [k], "fan_in": k}],
            "output": {"dims": [0, 4], "shape": [N, n]},
            "sizes": {0: N, 1: L, 2: n, 3: n, 4: n, 5: k},
            "steps": [
                {"op": "stride", "src": 1, "dst": 2, "stride": s},
                {"op": "shift", "src": 2, "dst": 3},
                {"op": "unfold", "src": 3, "dst": [4, 5], "window": k},
                {"op": "contract", "weight": 0, "rename": {}, "out": [0, 4]},
            ],
            "expr": {
                "iterators": [N, n],
                "reductions": [k],
                "mean": [False],
                "input": [
                    ["it", 0],
                    [
                        "mul",
                        ["mod", ["add", ["pad", ["sub", ["add", ["it", 1], ["red", 0]], ["const", k // 2]], n],
                                 ["const", 1]], n],
                        s,
                    ],
                ],
                "weights": [[["red", 0]]],
            },
        }
    )


def shift_stride_reference(x, w, s=2):
    y = np.roll(x[:, ::s], -1, axis=1)
    k = w.shape[0]
    yp = np.pad(y, ((0, 0), (k // 2, k // 2)))
    return np.stack([(yp[:, j : j + k] * w).sum(1) for j in range(y.shape[1])], axis=1)


def grouped_conv1d_program(N=2, C_in=4, L=6, G=2, Cog=3, k=3):
    """Grouped conv1d: SPLIT channels into groups, UNFOLD, contract (the group dim is shared, the
    per-group output channels are an outer dim), then MERGE (group, out) into C_out."""
    Cg = C_in // G
    return _json(
        {
            "input": {"dims": [0, 1, 2], "shape": [N, C_in, L]},
            "weights": [{"dims": [3, 9, 7, 8], "shape": [G, Cog, Cg, k], "fan_in": Cg * k}],
            "output": {"dims": [0, 10, 5], "shape": [N, G * Cog, L]},
            "sizes": {0: N, 1: C_in, 2: L, 3: G, 4: Cg, 5: L, 6: k, 7: Cg, 8: k, 9: Cog, 10: G * Cog},
            "steps": [
                {"op": "split", "src": 1, "dst": [3, 4]},
                {"op": "unfold", "src": 2, "dst": [5, 6], "window": k},
                {"op": "contract", "weight": 0, "rename": {4: 7, 6: 8}, "out": [0, 3, 9, 5]},
                {"op": "merge", "src": [3, 9], "dst": 10},
            ],
            "expr": {
                "iterators": [N, G * Cog, L],
                "reductions": [Cg, k],
                "mean": [False, False],
                "input": [
                    ["it", 0],
                    ["add", ["mul", ["div", ["it", 1], Cog], Cg], ["red", 0]],
                    ["pad", ["sub", ["add", ["it", 2], ["red", 1]], ["const", k // 2]], L],
                ],
                "weights": [[["div", ["it", 1], Cog], ["mod", ["it", 1], Cog], ["red", 0], ["red", 1]]],
            },
        }
    )


def expand_program(N=2, C=3, A=2, B=2):
    """EXPAND a broadcast dim, SPLIT it (still a broadcast), contract, and end with a permutation
    whose first dim is the broadcast: out[a, n, b] = sum_c x[n, c] w[c, b]."""
    return _json(
        {
            "input": {"dims": [0, 1], "shape": [N, C]},
            "weights": [{"dims": [1, 4], "shape": [C, B], "fan_in": C}],
            "output": {"dims": [3, 0, 4], "shape": [A, N, B]},
            "sizes": {0: N, 1: C, 2: A * B, 3: A, 4: B},
            "steps": [
                {"op": "expand", "dst": 2},
                {"op": "split", "src": 2, "dst": [3, 4]},
                {"op": "contract", "weight": 0, "rename": {}, "out": [0, 3, 4]},
            ],
            "expr": {
                "iterators": [A, N, B],
                "reductions": [C],
                "mean": [False],
                "input": [["it", 1], ["red", 0]],
                "weights": [[["red", 0], ["it", 2]]],
            },
        }
    )


def expand_merge_reduce_program(N=2, C=3, R=2, S=3):
    """EXPAND + MERGE with a real dim (repeat_interleave), then EXPAND + sum-REDUCE of a broadcast (x S)."""
    return _json(
        {
            "input": {"dims": [0, 1], "shape": [N, C]},
            "weights": [],
            "output": {"dims": [0, 3], "shape": [N, C * R]},
            "sizes": {0: N, 1: C, 2: R, 3: C * R, 4: S},
            "steps": [
                {"op": "expand", "dst": 2},
                {"op": "merge", "src": [1, 2], "dst": 3},
                {"op": "expand", "dst": 4},
                {"op": "reduce", "src": 4, "mean": False},
            ],
            "expr": {
                "iterators": [N, C * R],
                "reductions": [S],
                "mean": [False],
                "input": [["it", 0], ["div", ["it", 1], R]],
                "weights": [],
            },
        }
    )


def shift_merge_program(J=2, C=4):
    """MERGE, SHIFT, SPLIT, SHIFT: the oracle's index is ``((o0*C + (o1+1) mod C + 1) mod JC) div C``, a
    pattern TVM 0.27 mis-lowers when written with floordiv/floormod (see codegen.tvm._divmod)."""
    n = J * C
    m = ["mod", ["add", ["add", ["mul", ["it", 0], C], ["mod", ["add", ["it", 1], ["const", 1]], C]], ["const", 1]], n]
    return _json(
        {
            "input": {"dims": [0, 1], "shape": [J, C]},
            "weights": [],
            "output": {"dims": [4, 6], "shape": [J, C]},
            "sizes": {0: J, 1: C, 2: n, 3: n, 4: J, 5: C, 6: C},
            "steps": [
                {"op": "merge", "src": [0, 1], "dst": 2},
                {"op": "shift", "src": 2, "dst": 3},
                {"op": "split", "src": 3, "dst": [4, 5]},
                {"op": "shift", "src": 5, "dst": 6},
            ],
            "expr": {
                "iterators": [J, C],
                "reductions": [],
                "mean": [],
                "input": [["div", m, C], ["mod", m, C]],
                "weights": [],
            },
        }
    )


def unfold_small_program(L=2, k=5):
    """UNFOLD with a window wider than the dimension: the zero-padding guard must use the DIMENSION
    size (L=2), not the window (5)."""
    return _json(
        {
            "input": {"dims": [0], "shape": [L]},
            "weights": [],
            "output": {"dims": [1, 2], "shape": [L, k]},
            "sizes": {0: L, 1: L, 2: k},
            "steps": [{"op": "unfold", "src": 0, "dst": [1, 2], "window": k}],
            "expr": {
                "iterators": [L, k],
                "reductions": [],
                "mean": [],
                "input": [["pad", ["sub", ["add", ["it", 0], ["it", 1]], ["const", k // 2]], L]],
                "weights": [],
            },
        }
    )


# (program, reference(x, *weights)) pairs
def _cases():
    def conv_ref(stride=1):
        return lambda x, w: F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=stride,
                                     padding=w.shape[-1] // 2).numpy()

    def gconv_ref(x, w):
        G, Cog, Cg, k = w.shape
        return F.conv1d(torch.from_numpy(x), torch.from_numpy(w.reshape(G * Cog, Cg, k)), padding=k // 2,
                        groups=G).numpy()

    def unfold_small_ref(x):
        k = 5
        xp = np.pad(x, (k // 2, k // 2))
        return np.stack([xp[i : i + k] for i in range(x.shape[0])])

    return {
        "conv2d": (conv2d_program(), conv_ref()),
        "conv2d_rect_k5": (conv2d_program(N=1, C_in=2, C_out=3, H=7, W=6, k=5), conv_ref()),
        "conv2d_stride2": (conv2d_program(N=1, C_in=2, C_out=3, H=6, W=8, k=3, stride=2), conv_ref(2)),
        "linear": (linear_program(), lambda x, w: F.linear(torch.from_numpy(x), torch.from_numpy(w)).numpy()),
        "avgpool": (avgpool_program(), lambda x: F.avg_pool2d(torch.from_numpy(x), 2).numpy()),
        "shift_stride": (shift_stride_program(), shift_stride_reference),
        "grouped_conv1d": (grouped_conv1d_program(), gconv_ref),
        "expand": (expand_program(), lambda x, w: np.broadcast_to((x @ w)[None], (2,) + (x @ w).shape)),
        "expand_merge_reduce": (expand_merge_reduce_program(), lambda x: 3 * np.repeat(x, 2, axis=1)),
        "unfold_small": (unfold_small_program(), unfold_small_ref),
        "shift_merge": (shift_merge_program(),
                        lambda x: np.roll(np.roll(x.reshape(-1), -1).reshape(x.shape), -1, axis=1)),
    }


CASES = _cases()


def _inputs(program, seed=0):
    x = _rand(*program["input"]["shape"], seed=seed)
    ws = [_rand(*w["shape"], seed=seed + 1 + i) for i, w in enumerate(program["weights"])]
    return x, ws


# ------------------------------------------------------------------------------------------------
# code generation
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_stagewise_matches_reference(name):
    program, ref = CASES[name]
    x, ws = _inputs(program)
    kern = cg.build_kernel(program, "llvm")
    got = kern(x, *ws)
    assert list(got.shape) == program["output"]["shape"]
    _close(got, ref(x, *ws))


@pytest.mark.parametrize("name", list(CASES))
def test_stagewise_equals_fused(name):
    program, _ = CASES[name]
    x, ws = _inputs(program, seed=3)
    staged = cg.build_kernel(program)(x, *ws)
    fused = cg.build_kernel(cg.fused_primfunc(program))(x, *ws)
    _close(staged, fused)


@pytest.mark.parametrize("name", list(CASES))
def test_agrees_with_torch_codegen(name):
    """The TVM kernel takes the weights in the order and layout of the torch module's parameters()."""
    torch_codegen = pytest.importorskip("syno_automl.codegen.torch")
    program, _ = CASES[name]
    module = torch_codegen.build_module(program)
    params = list(module.parameters())
    assert [list(p.shape) for p in params] == [w["shape"] for w in program["weights"]]
    x = _rand(*program["input"]["shape"], seed=5)
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    got = cg.build_kernel(program)(x, *[p.detach().numpy() for p in params])
    _close(got, ref)


def test_one_compute_per_step():
    inputs, out = cg.program_to_te(conv2d_program())
    assert [t.op.name for t in inputs] == ["x", "w0"]
    # unfold, unfold, contract: three stages, no extra permute (the contraction already emits output order)
    stages, todo = [], [out]
    while todo:
        t = todo.pop()
        if isinstance(t.op, tvm.te.ComputeOp) and t.op.name not in stages:
            stages.append(t.op.name)
            todo.extend(t.op.input_tensors)
    assert len(stages) == 3 and stages[0].endswith("contract0"), stages
    func = cg.program_to_primfunc(conv2d_program())
    assert func.attrs["global_symbol"] == "main"
    assert [s for s, _ in cg.arg_shapes(func)] == [[2, 3, 5, 5], [4, 3, 3, 3], [2, 4, 5, 5]]


def test_int_and_str_keys():
    p = conv2d_program()
    p_int = dict(p, sizes={int(k): v for k, v in p["sizes"].items()})
    p_int["steps"] = [dict(s) for s in p["steps"]]
    p_int["steps"][-1]["rename"] = {int(k): v for k, v in p["steps"][-1]["rename"].items()}
    x, ws = _inputs(p)
    _close(cg.build_kernel(p_int)(x, *ws), cg.build_kernel(p)(x, *ws))


def test_bad_program_is_rejected():
    p = conv2d_program()
    p["steps"][-1]["out"] = [0, 99, 4, 6]
    with pytest.raises(ValueError, match="step 2"):
        cg.program_to_te(p)


def test_baselines_are_correct():
    x = _rand(1, 4, 6, 5)
    w = _rand(6, 2, 3, 3)
    got = cg.build_kernel(lat.conv2d_nchw_te(1, 4, 6, 6, 5, 3, stride=2, groups=2))(x, w)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1, groups=2).numpy()
    _close(got, ref)
    xd, wd = _rand(3, 5), _rand(7, 5)
    _close(cg.build_kernel(lat.dense_te(3, 5, 7))(xd, wd), xd @ wd.T)


def test_host_target():
    t = cg.make_target("llvm")
    assert t.kind.name == "llvm"
    assert int(t.attrs["num-cores"]) == os.cpu_count()
    assert str(t.attrs["mcpu"]) == tvm.target.codegen.llvm_get_system_cpu()


# ------------------------------------------------------------------------------------------------
# latency
# ------------------------------------------------------------------------------------------------


def test_untuned_latency():
    r = lat.tune_and_time(conv2d_program(), "llvm", UNTUNED)
    assert r.ok, r.note
    assert r.median_ms > 0 and r.spread_ms >= 0 and r.repeats == QUICK.repeat
    assert r.target == "llvm" and r.tuned_trials == 0 and len(r.samples_ms) == QUICK.repeat
    b = lat.tune_and_time(lat.conv2d_nchw_te(2, 3, 4, 5, 5, 3), "llvm", UNTUNED)
    assert b.ok, b.note
    assert lat.speedup(b, r) == pytest.approx(b.median_ms / r.median_ms)
    assert lat.speedup(b, lat.Latency.failed("llvm", "x")) is None


def test_failures_give_missing_latency():
    prog = conv2d_program()
    for target in ["llvm -mcpu=foo", {"kind": "no_such_kind"}, "rpc:missing-port@127.0.0.1"]:
        r = lat.tune_and_time(prog, target, UNTUNED)
        assert r.median_ms is None and r.note.startswith("target:"), r
    bad = conv2d_program()
    bad["steps"][0]["window"] = 4  # window dim 5 has size 3
    r = lat.tune_and_time(bad, "llvm", UNTUNED)
    assert r.median_ms is None and r.note.startswith("lower:") and "window" in r.note
    if not tvm.cuda(0).exist:
        r = lat.tune_and_time(prog, "cuda", UNTUNED)
        assert r.median_ms is None and "CUDA" in r.note


def test_isolated_crash_and_timeout():
    """A kernel that crashes the process (JIT-linking a missing symbol segfaults TVM) only kills the
    child; a child running past its budget is killed."""
    from tvm import te, tirx

    a = te.placeholder((8,), name="a")
    b = te.compute((8,), lambda i: a[i] + tirx.call_extern("float32", "syno_no_such_symbol", a[i]), name="b")
    func = te.create_prim_func([a, b]).with_attr("global_symbol", "main")
    r = lat.tune_and_time(func, "llvm", lat.MeasureRequest(protocol=QUICK, isolate=True))
    assert r.median_ms is None and "child exited" in r.note
    r = lat.tune_and_time(conv2d_program(), "llvm", lat.MeasureRequest(seconds=0.2, isolate=True, isolate_grace_s=0.3))
    assert r.median_ms is None and r.note.startswith("timeout"), r  # the child was killed at its limit


@pytest.mark.parametrize("trials, population, init_unmeasured, genetic_iters", [
    (1, 8, 8, 1),          # eight candidates a trial, no floor
    (2, 16, 16, 1),
    (4, 32, 32, 1),
    (32, 256, 50, 1),      # the CLI's default budget
    (64, 512, 50, 3),
    (255, 512, 50, 3),     # capped at MetaSchedule's default population
])
def test_search_strategy_is_sized_to_the_budget(trials, population, init_unmeasured, genetic_iters):
    from syno_automl.measure.metaschedule import search_strategy

    s = search_strategy(trials)
    assert (s.population_size, s.init_min_unmeasured, s.genetic_num_iters) == (population, init_unmeasured,
                                                                                 genetic_iters)
    assert search_strategy(256) == "evolutionary"  # MetaSchedule's own from 256 trials


def test_cost_model_within_xgboost_warmup():
    """A tuning of at most XGBoost's warm-up in trials (XGBModel predicts uniform random scores until then, yet
    retrains after every batch) gets UntrainedModel: uniform random scores, seeded, numpy's global generator left
    as it was; past the warm-up, XGBoost (where installed)."""
    import importlib.util
    import inspect

    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.cost_model import XGBModel
    from tvm.s_tir.schedule import Schedule

    from syno_automl.measure import metaschedule

    warmup = inspect.signature(XGBModel.__init__).parameters["num_warmup_samples"].default
    assert metaschedule.XGB_WARMUP_SAMPLES == warmup
    past = "xgb" if importlib.util.find_spec("xgboost") is not None else "random"
    assert metaschedule.cost_model(warmup + 1) == metaschedule.cost_model() == past
    metaschedule.ensure_tensor_intrin("llvm")  # (what a TuneContext would import otherwise: a minute, all of them)
    func = cg.program_to_primfunc(linear_program())
    mod = tvm.IRModule({"main": func})
    context = ms.TuneContext(mod=mod, target=cg.make_target("llvm"))
    candidates = [ms.MeasureCandidate(Schedule(mod), ms.arg_info.ArgInfo.from_prim_func(func)) for _ in range(8)]
    np.random.seed(3)
    state = np.random.get_state()[1].copy()
    models = [metaschedule.cost_model(warmup, seed=7) for _ in range(2)]
    assert all(isinstance(m, metaschedule.UntrainedModel) for m in models)
    scores = [m.predict(context, candidates) for m in models]
    assert np.array_equal(scores[0], scores[1]) and len(set(scores[0])) == 8
    assert ((0 <= scores[0]) & (scores[0] < 1)).all()
    assert not np.array_equal(metaschedule.cost_model(warmup, seed=8).predict(context, candidates), scores[0])
    assert (np.random.get_state()[1] == state).all()


@pytest.mark.slow
def test_metaschedule_tuning_and_database_reuse(tmp_path, monkeypatch):
    wd = str(tmp_path / "ms")
    prog = conv2d_program()
    # the in-process runner: LocalRunner starts and checks a worker process per tuning (~5 s each, three here);
    # the other MetaSchedule tests keep LocalRunner
    res = lat.compare(prog, lat.conv2d_nchw_te(2, 3, 4, 5, 5, 3), "llvm",
                      lat.MeasureRequest(trials=4, work_dir=wd, seconds=90, protocol=QUICK, runner="inprocess"))
    op, base = res["operator"], res["baseline"]
    assert op.ok, op.note
    assert base.ok, base.note
    assert op.tuned_trials >= 1 and not op.reused and op.tuning_s is not None
    assert res["speedup"] == pytest.approx(base.median_ms / op.median_ms)
    assert os.path.exists(os.path.join(wd, "database_tuning_record.json"))
    # same workload again: served from the on-disk database, no new trial (no wall-clock bound: machine load), and
    # no runner started (the default LocalRunner's start alone is a worker process importing TVM)
    from syno_automl.measure import metaschedule

    monkeypatch.setattr(metaschedule, "make_runner", lambda *args: pytest.fail("a runner was started"))
    again = lat.tune_and_time(conv2d_program(), "llvm", lat.MeasureRequest(trials=4, work_dir=wd, protocol=QUICK))
    assert again.ok and again.reused and again.tuned_trials == op.tuned_trials, again
    # the tuned schedule still computes the operator
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(work_dir=wd)
    mod = cg.program_to_irmodule(prog)
    recs = records_for(db, mod, cg.make_target("llvm"))
    kern = cg.build_kernel(lat.apply_record(mod, recs[0]))
    x, ws = _inputs(prog)
    _close(kern(x, *ws), CASES["conv2d"][1](x, *ws))


@pytest.mark.slow
def test_metaschedule_all_trials_fail(tmp_path):
    """Every candidate fails at run time: missing latency with the reason, no exception."""
    from tvm import te, tirx

    a = te.placeholder((16,), name="a")
    b = te.compute((16,), lambda i: tirx.call_extern("float32", "syno_no_such_symbol", a[i]), name="b")
    func = te.create_prim_func([a, b]).with_attr("global_symbol", "main")
    request = lat.MeasureRequest(trials=2, work_dir=str(tmp_path), seconds=60, protocol=QUICK)
    r = lat.tune_and_time(func, "llvm", request)
    assert r.median_ms is None and r.note.startswith("tune: no valid trial"), r


@pytest.mark.slow
def test_metaschedule_time_budget(tmp_path):
    """The budget is checked after every measured batch: an exhausted budget stops the search early and
    the best schedule found so far is timed."""
    from tvm import te

    a = te.placeholder((64, 64), name="a")
    b = te.compute((64, 64), lambda i, j: a[i, j] * 2 + 1, name="b")
    func = te.create_prim_func([a, b]).with_attr("global_symbol", "main")
    r = lat.tune_and_time(func, "llvm", lat.MeasureRequest(trials=8, work_dir=str(tmp_path), seconds=0.001,
                                                           protocol=QUICK))
    assert r.ok, r.note
    assert "stopped at" in r.note and 1 <= r.tuned_trials < 8, r


rpc_tracker = rpc_tracker_fixture("syno-test")


@pytest.mark.slow
def test_rpc_target(rpc_tracker, tmp_path):
    prog = conv2d_program()
    r = lat.tune_and_time(prog, f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}", UNTUNED)
    assert r.ok, r.note
    assert r.target == f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}" and r.repeats == QUICK.repeat
    bad = lat.tune_and_time(prog, f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}",
                            lat.MeasureRequest(protocol=QUICK, build_target={"kind": "no_such_kind"}))
    assert bad.median_ms is None
    # tuning through the tracker (MetaSchedule's RPCRunner), records kept apart from the host's
    tuned = lat.tune_and_time(prog, f"rpc:syno-test@127.0.0.1:{rpc_tracker.port}",
                              lat.MeasureRequest(trials=2, work_dir=str(tmp_path), seconds=60, protocol=QUICK))
    assert tuned.ok and tuned.tuned_trials >= 1, tuned.note
    assert os.path.exists(tmp_path / "rpc-syno-test" / "database_tuning_record.json")


@pytest.mark.slow
def test_time_torch():
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    x = torch.randn(2, 3, 5, 5)
    eager = lat.time_torch(conv, (x,), compile=False, protocol=QUICK)
    assert eager.ok and eager.target == "eager-cpu" and eager.repeats == QUICK.repeat, eager
    ind = lat.time_torch(conv, (x,), compile=True, protocol=QUICK)
    assert ind.target == "inductor-cpu"
    assert ind.ok, ind.note  # needs a C++ compiler; a failure would come back as median_ms=None

    class Boom(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    r = lat.time_torch(Boom(), (x,), compile=False, protocol=QUICK)
    assert r.median_ms is None and "boom" in r.note
