"""The model zoo (lightning_modules.models): output shapes, published parameter counts, and the substitutable layers."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_modules.models import MODEL_NAMES, GPTConfig, build_model
from lightning_modules.models.resnet import BasicBlock
from lightning_modules.models.resnext import ResNeXt29


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def same_padding_3x3_stride1(module: nn.Module) -> bool:
    return (isinstance(module, nn.Conv2d) and module.kernel_size == (3, 3) and module.stride == (1, 1)
            and module.padding == (1, 1))


@pytest.mark.parametrize("name, num_classes", [
    ("resnet18", 10),
    ("resnet34", 100),
    ("resnext29_2x64d", 10),
    ("densenet121", 10),
    ("efficientnet_v2_s", 100),
])
def test_cifar_models_map_32x32_images_to_logits(name: str, num_classes: int) -> None:
    model = build_model(name, num_classes=num_classes, in_channels=3).eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, num_classes)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("size, in_channels", [(8, 1), (16, 1), (32, 3)])
def test_small_cnn_accepts_8_to_32_pixel_inputs(size: int, in_channels: int) -> None:
    model = build_model("small_cnn", num_classes=10, in_channels=in_channels).eval()
    assert model(torch.randn(2, in_channels, size, size)).shape == (2, 10)


def test_small_cnn_keeps_its_3x3_stem_and_its_weights_layout() -> None:
    """A study made with small_cnn resumes to the same model: its stem, layers and parameter count are pinned."""
    model = build_model("small_cnn", num_classes=10, in_channels=1)
    convs = [(name, m.in_channels, m.out_channels, m.kernel_size, m.padding) for name, m in model.named_modules()
             if isinstance(m, nn.Conv2d)]
    assert convs == [("features.0.0", 1, 64, (3, 3), (1, 1)), ("features.1.0", 64, 64, (3, 3), (1, 1)),
                     ("features.3.0", 64, 128, (3, 3), (1, 1))]
    assert count_parameters(model) == 112_970


def test_pointwise_cnn_is_small_cnn_with_a_1x1_stem() -> None:
    pointwise, small = build_model("pointwise_cnn", 10, 1), build_model("small_cnn", 10, 1)
    stem = pointwise.features[0][0]
    assert isinstance(stem, nn.Conv2d) and stem.kernel_size == (1, 1) and stem.padding == (0, 0)
    shapes = {k: v.shape for k, v in pointwise.state_dict().items()}
    assert shapes.pop("features.0.0.weight") == (64, 1, 1, 1)
    assert shapes == {k: v.shape for k, v in small.state_dict().items() if k != "features.0.0.weight"}
    assert pointwise.eval()(torch.randn(2, 1, 8, 8)).shape == (2, 10)


@pytest.mark.parametrize("name, stem", [("pointwise_cnn1d", 1), ("small_cnn1d", 5)])
def test_the_1d_cnns_map_sequences_to_logits_through_three_3_tap_convs(name: str, stem: int) -> None:
    model = build_model(name, num_classes=10, in_channels=1).eval()
    assert model(torch.randn(2, 1, 40)).shape == (2, 10)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv1d)]
    assert [(m.in_channels, m.out_channels, m.kernel_size, m.padding) for m in convs] == [
        (1, 64, (stem,), (stem // 2,))] + [(64, 64, (3,), (1,))] * 3
    assert not any(isinstance(m, nn.Conv2d) for m in model.modules())


@pytest.mark.parametrize("name", ["pointwise_cnn", "small_cnn", "pointwise_cnn1d", "small_cnn1d"])
def test_an_even_stem_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="stem_kernel"):
        build_model(name, num_classes=10, in_channels=1, stem_kernel=2)


@pytest.mark.parametrize("name, num_classes, published", [
    ("resnet18", 10, 11_173_962),          # CIFAR ResNet-18, "11.17M"
    ("resnet34", 10, 21_282_122),          # CIFAR ResNet-34, "21.28M"
    ("resnext29_2x64d", 10, 9_130_314),    # ResNeXt-29 2x64d, "9.13M"
    ("densenet121", 10, 6_956_298),        # CIFAR DenseNet-121 (k=32), "6.96M"
    ("efficientnet_v2_s", 1000, 21_458_488),  # EfficientNet-V2-S, "21.5M" (1000 classes; the stem stride adds none)
])
def test_parameter_counts_match_the_published_models(name: str, num_classes: int, published: int) -> None:
    count = count_parameters(build_model(name, num_classes=num_classes, in_channels=3))
    assert abs(count - published) / published < 0.01


@pytest.mark.parametrize("cardinality, published", [(8, 34.4e6), (16, 68.1e6)])
def test_resnext29_widths_follow_the_paper_table(cardinality: int, published: float) -> None:
    # Table 7 of Xie et al.: ResNeXt-29 8x64d has 34.4M and 16x64d 68.1M parameters on CIFAR-10.
    assert abs(count_parameters(ResNeXt29(cardinality, 64, num_classes=10)) - published) / published < 0.005


def test_resnet18_has_16_block_convs_of_which_13_are_stride_1() -> None:
    # 4 stages x 2 BasicBlocks x 2 convs = 16 3x3 convs; the first conv of stages 2-4 has stride 2,
    # so 13 are stride-1 same-padding; the 3x3 stem (3 input channels) makes 14 in the whole model.
    model = build_model("resnet18", num_classes=10, in_channels=3)
    block_convs = [m for block in model.modules() if isinstance(block, BasicBlock)
                   for m in (block.conv1, block.conv2)]
    assert len(block_convs) == 16
    assert sum(same_padding_3x3_stride1(m) for m in block_convs) == 13
    assert sum(same_padding_3x3_stride1(m) for m in model.modules()) == 14


@pytest.mark.parametrize("name", [n for n in MODEL_NAMES if not n.startswith("gpt") and not n.endswith("1d")])
def test_every_3x3_stride_1_conv_is_a_same_padded_conv2d(name: str) -> None:
    model = build_model(name, num_classes=10, in_channels=3)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)
             and m.stride == (1, 1)]
    assert convs and all(m.padding == (1, 1) for m in convs)


def test_gpt_maps_tokens_to_next_token_logits_with_a_qkv_linear_per_block() -> None:
    model = build_model("gpt", num_classes=256, block_size=32).eval()
    logits = model(torch.randint(0, 256, (2, 16)))
    assert logits.shape == (2, 16, 256)
    d = model.config.d_model
    qkvs = [block.attn.qkv for block in model.blocks]
    assert len(qkvs) == model.config.n_layer
    assert all(type(q) is nn.Linear and (q.in_features, q.out_features) == (d, 3 * d) for q in qkvs)


def test_gpt_attention_is_causal() -> None:
    model = build_model("gpt", num_classes=256).eval()
    tokens = torch.randint(0, 256, (1, 12))
    changed = tokens.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 256
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :8], model(changed)[:, :8], atol=1e-6)


def test_gpt2_paper_configuration() -> None:
    config = GPTConfig.gpt2()
    assert (config.n_layer, config.n_head, config.d_model, config.vocab_size) == (12, 12, 768, 50257)
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(d_model=65, n_head=2)


def test_gpt_rejects_sequences_longer_than_its_block() -> None:
    model = build_model("gpt", num_classes=256, block_size=8)
    with pytest.raises(ValueError, match="block_size=8"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_unknown_model_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="resnet18.*small_cnn|small_cnn.*resnet18"):
        build_model("vgg16", num_classes=10, in_channels=3)
