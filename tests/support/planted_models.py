"""A tiny model with planted FFNs, for the perplexity, greedy-selection and replacement tests."""

from __future__ import annotations

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from conftest import VOCAB


def planted_model(batches=None, steps: int = 0) -> nn.Module:
    """A 4-block GPT-2 whose block 1 is exactly affine (its activation removed), trained ``steps`` steps on
    ``batches`` so that its blocks matter to its predictions."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_layer=4, n_head=4, n_embd=32, n_positions=64))
    model.transformer.h[1].mlp.act = nn.Identity()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        ids = batches.input_ids[(step * 16) % len(batches.input_ids) :][:16]
        model(ids, labels=ids).loss.backward()
        optimiser.step()
        optimiser.zero_grad()
    return model.eval().requires_grad_(False)


def widened(model: nn.Module, positions: int = 1024) -> nn.Module:
    """``model`` (a GPT-2) with its position table widened to ``positions`` rows, its first ones kept, the rest drawn
    (seeded): HumanEval's prompts take 240 to 400 of the tiny tokenizer's tokens, and a completion up to 512 more."""
    torch.manual_seed(1)
    short = model.transformer.wpe
    model.transformer.wpe = nn.Embedding(positions, short.embedding_dim)
    nn.init.normal_(model.transformer.wpe.weight, std=0.02)
    model.transformer.wpe.weight.data[: short.num_embeddings] = short.weight.data
    model.config.n_positions = positions
    return model.eval().requires_grad_(False)
