"""The embedded datasets' models trained as a search trains them (issue 33): does the operator decide the accuracy?

For each embedded image dataset (digits at 8x8, MNIST-1D) and each of its models (the default with a pointwise stem,
the kept variant with a spatial stem), the model is trained with the search's default training settings (the image
task's Lightning module: SGD, --lr 0.05, one-cycle, batch 64, 1 thread; the search's --epochs 3 and the final
stage's 6) once per seed, as it is ("conv") and with its substituted convs replaced by pointwise convs of the same
channels ("pointwise"): an operator without spatial reach. With a spatial stem the pointwise control stays near the
baseline (the stem alone sees enough); with a pointwise stem it falls, so the replaced layers' operator decides.

Printed per row: val_acc mean ± sd over the seeds and the seeds' values. Nothing is asserted.

    PYTHONPATH=. python bench/embedded_baselines.py                       # 3 seeds, 3 and 6 epochs
    PYTHONPATH=. python bench/embedded_baselines.py --seeds 5 --epochs 3 --datasets mnist1d
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import lightning as L  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from lightning_modules import build_datamodule, build_model  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.tasks import task_of  # noqa: E402

MODELS = {"digits": ("pointwise_cnn", "small_cnn"), "mnist1d": ("pointwise_cnn1d", "small_cnn1d")}


def pointwise_inner(model: nn.Module) -> nn.Module:
    """`model` with every conv the search substitutes (all but the stem) made pointwise: same channels, 1 tap."""
    convs = [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Conv1d, nn.Conv2d))]
    for name, conv in convs[1:]:
        parent = model.get_submodule(name.rsplit(".", 1)[0])
        kind = type(conv)
        setattr(parent, name.rsplit(".", 1)[1], kind(conv.in_channels, conv.out_channels, 1, bias=False))
    return model


def train_once(dataset: str, model_name: str, inner: str, epochs: int, seed: int) -> float:
    config = SearchConfig(dataset=dataset, model=model_name, epochs=epochs, seed=seed, tracking_uri=None)
    config.validate()
    task = task_of(config)
    datamodule = build_datamodule(dataset, batch_size=config.batch_size, **task.datamodule_kwargs(config))
    L.seed_everything(seed, verbose=False)
    model = build_model(model_name, num_classes=10, in_channels=1)
    if inner == "pointwise":
        model = pointwise_inner(model)
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(task.build_module(config, model, 10), datamodule=datamodule)
    return float(trainer.callback_metrics["val_acc"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", default="3,6", help="comma-separated training lengths (default: 3,6)")
    ap.add_argument("--datasets", default="digits,mnist1d")
    ap.add_argument("--inner", default="conv,pointwise", help="conv, pointwise or both (the substituted convs)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    print(f"{'dataset':8} {'model':16} {'inner':9} {'epochs':>6}  val_acc (mean ± sd)  seeds")
    for dataset in args.datasets.split(","):
        for model_name in MODELS[dataset]:
            for inner in args.inner.split(","):
                for epochs in (int(e) for e in args.epochs.split(",")):
                    values = [train_once(dataset, model_name, inner, epochs, seed) for seed in range(args.seeds)]
                    sd = statistics.stdev(values) if len(values) > 1 else 0.0
                    shown = " ".join(f"{v:.4f}" for v in values)
                    print(f"{dataset:8} {model_name:16} {inner:9} {epochs:6d}  {statistics.mean(values):.4f} ± "
                          f"{sd:.4f}      {shown}", flush=True)


if __name__ == "__main__":
    main()
