"""Why the embedded default is what it is (issue 14, point 3): can a cheaper operator show a speedup on it?

For each small-CNN width and digits image size asked (``--model``: the default pointwise_cnn, or small_cnn), the
default search's space is built as ``syno-automl search`` builds it, and two models are re-trained and timed the
way the search's final stage does it (``syno_automl.study.finalists``: ``--seeds`` training seeds x twice the
search's epochs, paired seeds; whole models timed in torch eager inference on the search's example batch, 1 thread,
interleaved rounds):

* the baseline (the original convs);
* the grouped conv with ``s`` = 2 groups, an operator of the default space (reached by canonical steps, so the
  search can propose it) at half the replaced convs' FLOPs: a yardstick of what a good operator gains.

Printed per setting: each model's accuracy (mean ± sd), the accuracy difference in points, and the measured
model speedup (the ratio against the baseline timed in the same run). Nothing is asserted.

    PYTHONPATH=. python bench/default_task.py                         # widths 32,64 at 8x8
    PYTHONPATH=. python bench/default_task.py --widths 64 --sizes 8,16 --seeds 3
    PYTHONPATH=. python bench/default_task.py --model small_cnn          # the 3x3 stem (the default before issue 33)
"""
from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")


import lightning_modules.models as zoo  # noqa: E402
from syno_automl import known  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.runtime.process import configure_process  # noqa: E402
from syno_automl.space import Operator, OperatorSpace  # noqa: E402
from syno_automl.speed.probe import measure_speedups  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.finalists import retrain  # noqa: E402
from syno_automl.study.verdict import Finalist  # noqa: E402

GROUPED_BY_S = ["REDUCE s^-1*C_in", "REDUCE k", "REDUCE k", "MERGE [s, s^-1*C_out] -> C_out",
                "CONTRACTION share [s, s^-1*C_in, k, k] outer [s^-1*C_out]",
                "SPLIT C_in -> [s, s^-1*C_in]", "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"]


def grouped_by_s(space: OperatorSpace) -> Operator:
    """The grouped conv with ``s`` groups (``known.grouped_conv2d``'s steps with the default space's ``s``)."""
    return known.walk(space, GROUPED_BY_S)


STEMS = {"pointwise_cnn": 1, "small_cnn": 3}   # the digits models: the default's 1x1 stem, small_cnn's 3x3


def one_setting(model: str, width: int, size: int, epochs: int, seeds: int) -> str:
    # the model zoo's entry at this width, for this setting only
    zoo._REGISTRY[model] = zoo._image(functools.partial(zoo.SmallCNN, width=width, stem_kernel=STEMS[model]))
    configure_process(threads=1)   # the bench is an entry point: one thread, the steady allocator
    context = prepare(SearchConfig(model=model, tracking_uri=None, image_size=size, epochs=epochs))
    op = grouped_by_s(context.space)
    final_epochs = 2 * epochs
    base, cand = Finalist("baseline", None, "", 1.0, None), Finalist("gconv", None, "", None, None)
    started = time.time()
    retrain(context, base, None, seeds, final_epochs)
    retrain(context, cand, op, seeds, final_epochs)
    speed = measure_speedups(context.speed_subject(), [op])
    estimate = speed.estimates[0]
    base_ms, ms, how = speed.baseline_ms, estimate.candidate_ms, speed.label
    sub = context.substitution
    return (f"{model}, width {width:3d}, {size:2d}x{size:<2d}: baseline {base.mean:.4f} ± {base.sd:.4f}, grouped "
            f"conv (s=2) {cand.mean:.4f} ± {cand.sd:.4f} ({100 * (cand.mean - base.mean):+.2f} pp), model speedup "
            f"{estimate.text()} ({base_ms:.2f} ms vs {ms:.2f} ms; {how})"
            f", FLOPs {sub.flops_ratio(op):.2f}x, planned cost {sub.cost_ratio(op):.2f}x  "
            f"[{time.time() - started:.0f} s]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=SearchConfig().model, choices=sorted(STEMS),
                    help="the digits model (default: the search's default, pointwise_cnn)")
    ap.add_argument("--widths", default="32,64")
    ap.add_argument("--sizes", default="8")
    ap.add_argument("--epochs", type=int, default=3, help="the search's epochs (final: twice); 3, the CLI's default")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    print(f"final-stage protocol: {args.seeds} seeds x {2 * args.epochs} epochs; speedup of the whole model")
    for width in (int(w) for w in args.widths.split(",")):
        for size in (int(s) for s in args.sizes.split(",")):
            print(one_setting(args.model, width, size, args.epochs, args.seeds), flush=True)


if __name__ == "__main__":
    main()
