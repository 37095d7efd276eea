"""How much of a model's time a search can win at most (issue 33): the share ``s`` of the original model's eager
inference time (cpu.eager as the final stage times it: the task's timing batch, 1 thread) spent in the layers the
search replaces, and what it allows.

The share is measured by the speed protocol (``syno_automl.speed.paired``): the whole original model against the
replaced layers alone, each layer called on the input it meets in the model, interleaved pairs, so the share comes
with its 95 % interval. Printed: ``s``; the whole-model speedup ``1 / (1 - s + s r)`` when the replaced layers take
``r`` of their time (r = 1/2, 1/3, 1/4); and the layer speedup a whole-model ``--speedup`` needs (Amdahl's law: the
rest of the model does not move). Nothing is asserted.

    python bench/replaced_share.py                          # the default search's model (digits)
    python bench/replaced_share.py --dataset mnist1d        # the 1-D CNN on MNIST-1D
    python bench/replaced_share.py --model resnet18 --image-size 16
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")


def replaced_layers_call(context: Any) -> tuple[Any, Any, list[tuple[int, ...]]]:
    """(the original model's call, a call of its replaced layers alone on the inputs they meet in it, the shapes
    of those inputs, one per layer)."""
    import torch

    from syno_automl.placeholder import placeholders
    from syno_automl.runtime.allocator import steady_allocator

    steady_allocator()   # as the final stage's timing: the allocation history does not move the figures
    model = context.substitution.original_model().eval()
    layers = [p for _, p in placeholders(model)]
    example = context.timing_example
    inputs: list[Any] = []
    hooks = [p.register_forward_pre_hook(lambda _m, args: inputs.append(args[0].clone())) for p in layers]
    with torch.inference_mode():
        model(example)
    for hook in hooks:
        hook.remove()

    def whole() -> Any:
        with torch.inference_mode():
            return model(example)

    def replaced() -> None:
        with torch.inference_mode():
            for p, x in zip(layers, inputs):
                p(x)
    return whole, replaced, [tuple(x.shape) for x in inputs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--model", default=None, help="default: the dataset's default model")
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--speedup", type=float, default=1.3, help="the whole-model speedup asked (default 1.3)")
    args = ap.parse_args()

    import torch

    from syno_automl.config import SearchConfig
    from syno_automl.speed.paired import SPEED_PROTOCOL, paired_speedup
    from syno_automl.study import prepare

    torch.set_num_threads(1)
    options: dict[str, Any] = {"dataset": args.dataset, "tracking_uri": None}
    if args.model is not None:
        options["model"] = args.model
    if args.image_size is not None:
        options["image_size"] = args.image_size
    context = prepare(SearchConfig(**options))
    whole, replaced, shapes = replaced_layers_call(context)
    # the whole model is the "baseline" and the layers the "candidate": the speedup is whole / layers = 1 / s
    estimate = paired_speedup(whole, replaced, SPEED_PROTOCOL)
    share, low, high = 1 / estimate.ratio, 1 / estimate.high, 1 / estimate.low
    print(f"{context.config.model} on {args.dataset}: {len(shapes)} replaced layers take {100 * share:.1f} % "
          f"[{100 * low:.1f}, {100 * high:.1f}] of the original model's eager inference time "
          f"({estimate.pairs} pairs, batch {tuple(context.timing_example.shape)}, 1 thread)")
    for r in (1 / 2, 1 / 3, 1 / 4):
        print(f"  replaced layers at {r:.2f} of their time: the whole model {1 / (1 - share + share * r):.2f}x")
    need = 1 / args.speedup - (1 - share)
    if need <= 0:
        print(f"  a whole-model {args.speedup:g}x is out of reach: the rest of the model alone takes "
              f"{100 * (1 - share):.0f} % of its time")
    else:
        print(f"  a whole-model {args.speedup:g}x needs the replaced layers {share / need:.2f}x faster "
              f"(at {need / share:.2f} of their time)")


if __name__ == "__main__":
    main()
