"""Initial scale of sampled operators against the layer they replace (issue 10, item 6). Figures printed, nothing
asserted (tests/ir/test_initial_scale.py holds the checks).

    PYTHONPATH=. python bench/init_scale.py [--count 60] [--lm 30]

1. Independent inputs: output std of operator / replaced torch layer (default init) on N(0, 1) inputs, for
   operators sampled from a conv2d and a linear spec, with the current init (syno_automl.ir.weight_stds) and the
   former one (normal, sqrt(2 / the native fan_in)).
2. Real activations: the same ratio on the digits small_cnn's placeholder inputs (what match_scale corrects).
3. Language model: 10 AdamW steps (lr 3e-3, clip 1.0) of the tiny GPT with each operator in *.qkv; how many
   reach a non-finite loss, per init, with and without match_output_scale.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightning_modules import DigitsDataModule, build_model  # noqa: E402
from syno_automl import OperatorSpace  # noqa: E402
from syno_automl.placeholder import substitute  # noqa: E402
from syno_automl.search.callbacks import _placeholder_inputs, match_output_scale  # noqa: E402

SPECS = {
    "conv2d": ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
               ["k=3: 2", "s=2: 2"], {"N": 8, "C_in": 16, "C_out": 16, "H": 8, "W": 8}),
    "linear": ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["k=3: 2", "s=2: 2"],
               {"N": 64, "C_in": 64, "C_out": 64}),
}


def _old_init(module: nn.Module, program: dict) -> None:
    with torch.no_grad():
        for w, spec in zip(module.parameters(), program["weights"]):
            w.normal_(0, math.sqrt(2 / max(spec["fan_in"], 1)))


def _summary(label: str, r: np.ndarray) -> None:
    p5, p50, p95 = np.percentile(r, [5, 50, 95])
    print(f"  {label}: ratio p5 {p5:.3f} p50 {p50:.3f} p95 {p95:.3f} min {r.min():.3f} max {r.max():.3f}; "
          f"within [0.5, 2]: {int(((r >= .5) & (r <= 2)).sum())}/{len(r)}")


def independent(count: int) -> None:
    print("1. N(0, 1) inputs, operator / replaced layer output std")
    for name, (i, o, prim, coef, m) in SPECS.items():
        ops = OperatorSpace(i, o, prim, coef, [m], max_depth=8).sample(count, seed=3)
        new, old = [], []
        torch.manual_seed(0)
        for op in ops:
            p = op.program(0)
            mod = op.to_module(0).double()
            x = torch.randn(p["input"]["shape"], dtype=torch.float64)
            layer = (nn.Conv2d(m["C_in"], m["C_out"], 3, padding=1) if name == "conv2d"
                     else nn.Linear(m["C_in"], m["C_out"]))
            with torch.no_grad():
                ref = layer.double()(x).std().item()
                new.append(mod(x).std().item() / ref)
                _old_init(mod, p)
                old.append(mod(x).std().item() / ref)
        print(f" {name} ({len(ops)} operators)")
        _summary("current init", np.array(new))
        _summary("former init ", np.array(old))


def real(count: int) -> None:
    print("2. digits small_cnn placeholder inputs (no match_scale)")
    torch.manual_seed(0)
    dm = DigitsDataModule(image_size=8, batch_size=64)
    dm.setup("fit")
    x = next(iter(dm.train_dataloader()))[0]
    model = build_model("small_cnn", 10, 1)
    sub = substitute(model, nn.Conv2d, x, flops_ratio=0.5, where=lambda n, m: m.in_channels != 1, max_depth=8)
    inputs = _placeholder_inputs(sub, model, x)
    ratios = []
    for op in sub.space.sample(count, seed=7):
        mods = sub.apply(op)
        with torch.no_grad():
            for (_, ph), m, inp in zip(sub.placeholders, mods, inputs):
                ratios.append(m(inp).std().item() / ph.referred_layer(inp).std().item())
        sub.reset()
    _summary(f"{count} operators x 2 layers", np.array(ratios))


def language_model(count: int) -> None:
    print("3. tiny GPT, operator in *.qkv, 10 AdamW steps: non-finite losses")
    text = (ROOT.joinpath("README.md").read_bytes() * 4)[:20000]
    data = torch.tensor(list(text), dtype=torch.long)

    def batch(g: torch.Generator):
        i = torch.randint(0, len(data) - 33, (16,), generator=g)
        return torch.stack([data[j:j + 32] for j in i]), torch.stack([data[j + 1:j + 33] for j in i])

    x0, _ = batch(torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    space = substitute(build_model("gpt", num_classes=256, block_size=32), nn.Linear, x0, where="*.qkv",
                       flops_ratio=0.5, max_depth=8).space
    ops = space.sample(count, seed=11)
    for init in ("current", "former"):
        for match in (True, False):
            bad = 0
            for op in ops:
                torch.manual_seed(1)
                model = build_model("gpt", num_classes=256, block_size=32)
                sub = substitute(model, nn.Linear, x0, where="*.qkv", max_depth=8)
                inputs = _placeholder_inputs(sub, model, x0)
                mods = sub.apply(op)
                if init == "former":
                    for i, m in enumerate(mods):
                        _old_init(m, op.program(i))
                if match:
                    match_output_scale(sub, mods, inputs)
                opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
                g = torch.Generator().manual_seed(2)
                for _ in range(10):
                    xb, yb = batch(g)
                    loss = F.cross_entropy(model(xb).reshape(-1, 256), yb.reshape(-1))
                    if not torch.isfinite(loss):
                        bad += 1
                        break
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
            print(f"  init {init}, match_scale {match}: {bad}/{len(ops)} non-finite")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--lm", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    independent(args.count)
    real(args.count // 3 * 2)
    language_model(args.lm)


if __name__ == "__main__":
    main()
