"""How fast a model decodes, before and after its blocks are replaced: greedy generation timed on one device.

A replacement saves numbers; whether it saves time depends on the device and on what else a step costs (attention,
the head, the key-value cache), so it is measured, not inferred from the numbers saved. :func:`decode_rate` times
greedy decoding of exactly ``new_tokens`` tokens after a fixed prompt (the same device, batch and lengths for both
models), once to warm up and then ``repeats`` times, and reports the median rate.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

from linrec.core.capture import input_device, require_eval
from linrec.errors import LinrecError

PROMPT_TOKENS = 32
"""Tokens of the prompt each timed generation starts from."""

NEW_TOKENS = 32
"""Tokens each timed generation decodes."""

REPEATS = 3
"""Timed generations per model (after one to warm up); the rate is their median."""


@dataclass(frozen=True)
class DecodeRate:
    """Greedy decoding speed: ``tokens_per_s`` = batch × new tokens / seconds, the median over the timed runs."""

    tokens_per_s: float
    device: str
    batch: int
    prompt_tokens: int
    new_tokens: int
    repeats: int


def decode_rate(
    model: nn.Module, prompt: torch.Tensor, new_tokens: int = NEW_TOKENS, repeats: int = REPEATS
) -> DecodeRate:
    """Time greedy decoding of exactly ``new_tokens`` after ``prompt`` (token ids, (batch, length), no padding)."""
    require_eval(model, "the timed decoding")
    if prompt.ndim != 2 or prompt.shape[1] < 1 or new_tokens < 1 or repeats < 1:
        raise LinrecError(
            f"decode_rate needs a (batch, length) prompt of at least one token, new_tokens >= 1 and repeats >= 1; "
            f"got a prompt of shape {tuple(prompt.shape)}, new_tokens={new_tokens}, repeats={repeats}"
        )
    generate = getattr(model, "generate", None)
    if not callable(generate):
        raise LinrecError("the model cannot generate (no generate()); time a causal LM with its head")
    device = input_device(model)
    ids = prompt.to(device)
    mask = torch.ones_like(ids)
    pad = getattr(getattr(model, "config", None), "eos_token_id", None)
    pad = pad[0] if isinstance(pad, list) else pad

    def once() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        with torch.no_grad():
            generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                     do_sample=False, pad_token_id=0 if pad is None else pad)  # fmt: skip
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    once()  # warm-up: kernels chosen, caches allocated
    seconds = statistics.median(once() for _ in range(repeats))
    batch, length = ids.shape
    return DecodeRate(batch * new_tokens / seconds, str(device), batch, length, new_tokens, repeats)
