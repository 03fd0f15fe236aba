"""Random token windows and their logits, for the gated replacement's tests."""

from __future__ import annotations

import torch
from torch import nn

from linrec.data.tokens import TokenBatches


def random_batches(n: int, seed: int, seq_len: int = 32, batch_size: int = 8) -> TokenBatches:
    """``n`` windows of random token ids, no padding."""
    ids = torch.randint(0, 320, (n, seq_len), generator=torch.Generator().manual_seed(seed))
    return TokenBatches(ids, torch.ones_like(ids), batch_size)


def logits(model: nn.Module, batches: TokenBatches) -> torch.Tensor:
    """The model's logits over every window of ``batches``."""
    with torch.no_grad():
        return torch.cat([model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits for b in batches])
