"""How fast a model decodes, before and after its blocks are replaced: greedy generation timed on one device.

A replacement saves numbers; whether it saves time depends on the device and on what else a step costs (attention,
the head, the key-value cache), so it is measured, not inferred from the numbers saved. :func:`decode_rate` times
greedy decoding of exactly ``new_tokens`` tokens after a fixed prompt, once to warm up and then ``repeats`` times,
and reports the median rate with the slowest and fastest run. :func:`compare_rates` times two models (the same
device, batch and lengths) in turns, one run of each after the other, so what else the machine does slows both alike,
and gives the speed-up of each pair: its median and range, and whether that range leaves 1 (a change the runs'
spread does not cover). On a shared machine single timings vary several-fold; a ratio whose range covers 1 is none.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

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

COMPARED = 5
"""Timed generations of each model when two are compared (:func:`compare_rates`), in turns."""


@dataclass(frozen=True)
class DecodeRate:
    """Greedy decoding speed: ``tokens_per_s`` = batch × new tokens / seconds, the median over the timed runs;
    ``low`` and ``high`` the slowest and fastest run's."""

    tokens_per_s: float
    device: str
    batch: int
    prompt_tokens: int
    new_tokens: int
    repeats: int
    low: float
    high: float


@dataclass(frozen=True)
class RateComparison:
    """Two models' decoding speeds timed in turns, and the speed-up of each pair (changed / base): its median
    ``speedup`` and range [``speedup_low``, ``speedup_high``]."""

    base: DecodeRate
    changed: DecodeRate
    speedup: float
    speedup_low: float
    speedup_high: float

    @property
    def clear(self) -> bool:
        """Whether every pair's speed-up lies on one side of 1: a change the spread of the runs does not cover."""
        return self.speedup_low > 1 or self.speedup_high < 1

    def record(self) -> dict:
        """The comparison as the replacement record keeps it (``latency``)."""
        base, changed = self.base, self.changed
        return {
            "device": base.device,
            "batch": base.batch,
            "prompt_tokens": base.prompt_tokens,
            "new_tokens": base.new_tokens,
            "repeats": base.repeats,
            "base_tokens_per_s": base.tokens_per_s,
            "base_low": base.low,
            "base_high": base.high,
            "replaced_tokens_per_s": changed.tokens_per_s,
            "replaced_low": changed.low,
            "replaced_high": changed.high,
            "speedup": self.speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "speedup_clear": self.clear,
        }


def _timer(model: nn.Module, prompt: torch.Tensor, new_tokens: int, repeats: int) -> Callable[[], float]:
    """A function that times one greedy generation of exactly ``new_tokens`` after ``prompt`` (seconds), the request
    checked first."""
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

    return once


def _rate(model: nn.Module, prompt: torch.Tensor, new_tokens: int, seconds: list[float]) -> DecodeRate:
    tokens = prompt.shape[0] * new_tokens
    return DecodeRate(
        tokens / statistics.median(seconds), str(input_device(model)), prompt.shape[0], prompt.shape[1], new_tokens,
        len(seconds), tokens / max(seconds), tokens / min(seconds),
    )  # fmt: skip


def decode_rate(
    model: nn.Module, prompt: torch.Tensor, new_tokens: int = NEW_TOKENS, repeats: int = REPEATS
) -> DecodeRate:
    """Time greedy decoding of exactly ``new_tokens`` after ``prompt`` (token ids, (batch, length), no padding)."""
    once = _timer(model, prompt, new_tokens, repeats)
    once()  # warm-up: kernels chosen, caches allocated
    return _rate(model, prompt, new_tokens, [once() for _ in range(repeats)])


def compare_rates(
    model: nn.Module,
    prompt: torch.Tensor,
    changed: Callable[[], AbstractContextManager[Any]],
    new_tokens: int = NEW_TOKENS,
    repeats: int = COMPARED,
) -> RateComparison:
    """``model`` as it is against ``model`` within ``changed()`` (its replacements swapped in), each timed
    ``repeats`` times in turns after a warm-up of each (:func:`decode_rate`'s runs): the two rates and the speed-up of
    each pair."""
    once = _timer(model, prompt, new_tokens, repeats)
    base: list[float] = []
    other: list[float] = []
    for step in range(repeats + 1):  # the first of each a warm-up
        seconds = once()
        with changed():
            seconds_changed = once()
        if step:
            base.append(seconds)
            other.append(seconds_changed)
    ratios = sorted(b / c for b, c in zip(base, other, strict=True))
    return RateComparison(
        _rate(model, prompt, new_tokens, base),
        _rate(model, prompt, new_tokens, other),
        statistics.median(ratios),
        ratios[0],
        ratios[-1],
    )
