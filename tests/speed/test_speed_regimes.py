"""Speed regimes apart from training (--speed-batch, --speed-size), the strongest setup of each target
(speed/setup.py), and the cuda.triton target: what is timed, at which sizes, and how the figure says so. No GPU
here: the CUDA setups are checked as plans and on CPU models, the timing on the CPU."""
from __future__ import annotations

import pytest
import torch
from _syno_helpers import brief_speed_protocol

from syno_automl.config import SearchConfig
from syno_automl.errors import OptionError
from syno_automl.runtime import SPEED_TARGETS, parse_target
from syno_automl.runtime.timing_rigor import fast_timing
from syno_automl.speed.probe import SpeedProbe, substituted_model
from syno_automl.speed.setup import SMALL_BATCH, timing_setup
from syno_automl.study.context import prepare, regime_batch


@pytest.mark.parametrize("shape, batch, size, expected", [
    ((64, 1, 8, 8), 1, 224, (1, 1, 224, 224)),      # deployed latency: one image at ImageNet's side
    ((4, 3, 8, 8), 10, None, (10, 3, 8, 8)),         # more rows than the batch holds: cycled
    ((64, 40, 32), 2, 128, (2, 40, 128)),            # a 1-D model's sequences: their length
    ((8, 3, 8, 8), None, None, (8, 3, 8, 8)),        # the training's regime: unchanged
])
def test_a_regime_resizes_the_timing_batch(shape, batch, size, expected):
    example = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    out = regime_batch(example, batch, size)
    assert tuple(out.shape) == expected
    if batch and batch > shape[0]:
        assert torch.equal(out[shape[0]], out[0])   # cycled, not padded


def test_a_token_batch_keeps_its_length():
    tokens = torch.randint(0, 100, (8, 64))
    assert tuple(regime_batch(tokens, 2, 224).shape) == (2, 64)


@pytest.mark.parametrize("target, mode, shape, text", [
    ("cuda.compiled", "default", (1, 3, 224, 224), "channels-last, cudnn.benchmark, torch.compile reduce-overhead "
                                                  "(CUDA graphs)"),
    ("cuda.compiled", "default", (SMALL_BATCH + 1, 3, 32, 32), "channels-last, cudnn.benchmark, torch.compile "
                                                              "default"),
    ("cuda.compiled", "max-autotune", (256, 3, 32, 32), "channels-last, cudnn.benchmark, torch.compile "
                                                        "max-autotune (CUDA graphs)"),
    ("cuda.triton", "max-autotune", (1, 3, 224, 224), "channels-last, cudnn.benchmark, torch.compile max-autotune "
                                                      "(CUDA graphs)"),
    ("cuda.eager", "max-autotune", (64, 3, 32, 32), "channels-last, cudnn.benchmark, eager"),
    ("cuda.eager", "default", (64, 40, 32), "contiguous, cudnn.benchmark, eager"),     # 1-D: no channels-last
    ("cpu.compiled", "default", (1, 3, 224, 224), "contiguous, torch.compile default"),
    ("cpu.eager", "default", (64, 1, 8, 8), "contiguous, eager"),
])
def test_each_target_runs_both_sides_in_its_strongest_setup(target, mode, shape, text):
    assert timing_setup(parse_target(target), mode, shape).text() == text


def test_the_setup_leaves_cudnn_as_it_found_it_and_refuses_an_unknown_mode():
    setup = timing_setup(parse_target("cuda.eager"), "default", (2, 3, 8, 8))
    before = torch.backends.cudnn.benchmark
    with setup.running():
        assert torch.backends.cudnn.benchmark
    assert torch.backends.cudnn.benchmark == before
    with pytest.raises(OptionError, match="compile_mode"):
        timing_setup(parse_target("cuda.eager"), "fastest", (2, 3, 8, 8))


def test_the_triton_target_is_a_compiled_cuda_target_and_cpu_has_none():
    t = parse_target("cuda.triton")
    assert t.cuda and t.compiled and t.triton and "cpu.triton" not in SPEED_TARGETS
    with pytest.raises(OptionError):
        parse_target("cpu.triton")


@pytest.fixture(scope="module")
def regime_context():
    return prepare(SearchConfig(tracking_uri=None, max_depth=6, speed_batch=2, speed_size=16))


def test_an_operator_of_the_search_is_timed_at_the_regimes_sizes(regime_context):
    context = regime_context
    subject = context.speed_subject()
    assert subject.batch_label == "batch 2 at 16×16" and tuple(subject.example.shape) == (2, 1, 16, 16)
    # every replaced layer at twice the search's sides (16 against 8), the search's own space untouched
    pairs = list(zip(subject.substitution.space.mappings, context.space.mappings))
    assert pairs and all(r["H"] == 2 * s["H"] and r["W"] == 2 * s["W"] and r["N"] == 2 for r, s in pairs)
    assert context.space.mappings[0]["H"] == 8
    op = context.space.sample(1, seed=3)[0]
    model = substituted_model(subject.substitution, op)
    assert model(subject.example).shape[0] == 2          # the operator replayed at 16x16 runs there
    estimate = SpeedProbe(subject, protocol=brief_speed_protocol()).measure(op)
    assert estimate is not None and estimate.ratio > 0
    assert estimate.conditions.batch == "batch 2 at 16×16" and estimate.conditions.setup \
        == "contiguous, eager" + (", fast timing" if fast_timing() else "")


def test_a_triton_substitution_builds_the_generated_modules(regime_context):
    context = regime_context
    op = next(o for o in context.space.sample(8, seed=5))
    model = substituted_model(context.substitution, op, triton=True)
    backends = {getattr(m, "syno_backend", None) for m in model.modules() if hasattr(m, "syno_backend")}
    assert backends and backends <= {"triton", "torch"}
    assert model(context.example[:2]).shape[0] == 2   # on a CPU tensor each runs its torch lowering
