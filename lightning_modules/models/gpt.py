"""A GPT-2-style decoder (Radford et al., 2019): token + position embeddings, pre-LN blocks, tied LM head.

The attention's QKV projection is one ``nn.Linear(d_model, 3 * d_model)`` named ``qkv`` so that it can be
substituted by a synthesized operator mapping ``[B, T, d] -> [B, T, 3d]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from syno_automl.errors import OptionError, ShapeError


@dataclass(frozen=True)
class GPTConfig:
    """Decoder sizes; the defaults are a tiny model for CPU runs, ``GPTConfig.gpt2()`` is the paper's."""

    vocab_size: int = 256
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    dropout: float = 0.0

    @classmethod
    def gpt2(cls, vocab_size: int = 50257, block_size: int = 1024) -> GPTConfig:
        """The GPT-2 small configuration: 12 layers, 12 heads, 768 wide."""
        return cls(vocab_size=vocab_size, block_size=block_size, n_layer=12, n_head=12, d_model=768)

    def __post_init__(self) -> None:
        if self.d_model % self.n_head != 0:
            raise OptionError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a single fused QKV projection ``self.qkv``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, steps, self.n_head, width // self.n_head).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             dropout_p=self.dropout if self.training else 0.0)
        return self.proj(out.transpose(1, 2).reshape(batch, steps, width))


class MLP(nn.Module):
    """Position-wise feed-forward: d -> 4d (GELU) -> d."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.proj = nn.Linear(4 * config.d_model, config.d_model)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x), approximate="tanh")))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only language model returning logits ``[B, T, vocab_size]`` for token ids ``[B, T]``.

    Example:
        >>> GPT(GPTConfig())(torch.zeros(2, 16, dtype=torch.long)).shape
        torch.Size([2, 16, 256])
    """

    def __init__(self, config: GPTConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or GPTConfig()
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.block_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):  # residual projections scaled as in GPT-2
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        steps = idx.shape[1]
        if steps > self.config.block_size:
            raise ShapeError(f"sequence length {steps} exceeds block_size={self.config.block_size}")
        positions = torch.arange(steps, device=idx.device)
        x = self.drop(self.token_embedding(idx) + self.position_embedding(positions))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def gpt(vocab_size: int = 256, **kw: Any) -> GPT:
    """A GPT with the tiny default sizes, overridable by keyword (n_layer, n_head, d_model, block_size...)."""
    return GPT(GPTConfig(vocab_size=vocab_size, **kw))


def gpt2(vocab_size: int = 50257, block_size: int = 1024) -> GPT:
    """The paper's GPT-2 small configuration (12 layers, 12 heads, 768 wide)."""
    return GPT(GPTConfig.gpt2(vocab_size, block_size))
