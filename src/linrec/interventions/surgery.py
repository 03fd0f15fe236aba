"""Reversible block surgery: put a fitted map where an FFN was, and count what it stores.

Replacements map the FFN's input hidden states (..., d) to its output (..., d). They are frozen,
like a loaded model (``requires_grad_(True)`` to fine-tune one). Each computes in its own dtype
(float32 by default, whatever the model's) and returns the input's dtype, so a bf16 model gets
bf16 back. Kinds, with the numbers each stores:

* ``affine``: the closed-form map ŷ = x W + b; stores d_in·d_out + d_out numbers.
* ``lowrank``: a rank-k truncation ŷ = (x D) E + b (D: d_in×k, E: k×d_out); k·(d_in + d_out) + d_out.
* ``poly``: a fitted :class:`linrec.interventions.probes.PolyProbe` (seeded-poly); its parameters and buffers,
  d_in·d_out + d_out (linear) + r·(2·d_in + d_out) (U, V, P) + 1 or d_out (gate)
  + 2·d_in + d_out + 1 (the standardisation: input mean and std, output mean and scale).
* ``mean``: the block's mean output on the training rows (mean ablation); d_out (the stored mean).
* ``zero``: nothing, the block removed; 0.

"Numbers stored" (:func:`n_stored`) is parameters plus buffers, for the original FFN too, so a
GPT-2-shaped FFN (d=768, 3072 hidden: 4,722,432 numbers) against its affine map (590,592)
gives a ratio of 7.996, the paper's "8x".

The rank-k truncation is by default the best rank-k map on the training inputs (reduced-rank
regression: W projected onto the top-k eigenvectors of the prediction covariance WᵀCxxW);
``weighted=False`` truncates the SVD of W itself. Either way the bias is refitted,
b = ȳ - x̄ W_k.

:func:`swapped` is a context manager: it sets the replacements on the FFNs' parent modules and,
on exit (also after an exception), puts the very same original module objects back, so the
model is restored bitwise. Surgery needs an FFN that is one module (input == output module in
its :class:`~linrec.models.arch.BlockSpec`: GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Gemma 3).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, AffineFit, fit_affine
from linrec.core.moments import Moments, merge_folds
from linrec.errors import LinrecError
from linrec.models.arch import Spec, ffn_blocks, select_blocks

FROM_MOMENTS = ("affine", "lowrank", "mean", "zero")
"""Replacements :func:`fit_replacements` builds from moments alone (a poly needs rows: see probes)."""


def ffn_site(model: nn.Module, block: int, spec: Spec = None) -> tuple[nn.Module, str, nn.Module]:
    """(parent module, attribute name, FFN module) of FFN block ``block``."""
    (b,) = select_blocks(ffn_blocks(model, spec), [block])
    if b.input != b.output:
        raise LinrecError(
            f"block {block}'s FFN spans two modules ('{b.input}' in, '{b.output}' out); surgery and cross-feeding "
            "need an FFN that is one module mapping hidden states to hidden states (gpt2, gpt_neox, llama, mistral, "
            "qwen2, gemma3_text), or a spec naming such a module as both input and output"
        )
    parent_name, _, attr = b.input.rpartition(".")
    parent = model.get_submodule(parent_name)
    return parent, attr, getattr(parent, attr)


def n_stored(module: nn.Module) -> int:
    """Numbers a module stores: its parameters plus its buffers."""
    return sum(t.numel() for t in module.parameters()) + sum(t.numel() for t in module.buffers())


class AffineFFN(nn.Module):
    """ŷ = x W + b."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.weight = nn.Parameter(
            weight.detach().T.to(dtype).contiguous(), requires_grad=False
        )  # (d_out, d_in), as nn.Linear
        self.bias = nn.Parameter(bias.detach().to(dtype).clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)


class LowRankFFN(nn.Module):
    """ŷ = (x D) E + b with D (d_in, k) and E (k, d_out)."""

    def __init__(
        self, down: torch.Tensor, up: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.down = nn.Parameter(down.detach().T.to(dtype).contiguous(), requires_grad=False)
        self.up = nn.Parameter(up.detach().T.to(dtype).contiguous(), requires_grad=False)
        self.bias = nn.Parameter(bias.detach().to(dtype).clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(x.to(self.down.dtype), self.down), self.up, self.bias).to(x.dtype)


class MeanFFN(nn.Module):
    """ŷ = ȳ for every token (mean ablation); the mean is a buffer."""

    mean: torch.Tensor  # registered as a buffer in __init__

    def __init__(self, mean: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.register_buffer("mean", mean.detach().to(dtype).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean.to(x.dtype).expand(*x.shape[:-1], self.mean.shape[0])


class ZeroFFN(nn.Module):
    """ŷ = 0: the block removed (its output width equals its input width, as for every FFN here)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def affine_ffn(fit: AffineFit, dtype: torch.dtype = torch.float32) -> AffineFFN:
    """The closed-form map as a module."""
    return AffineFFN(fit.weight, fit.bias, dtype)


def low_rank_ffn(
    fit: AffineFit, train: Moments, rank: int, weighted: bool = True, dtype: torch.dtype = torch.float32
) -> LowRankFFN:
    """A rank-``rank`` truncation of ``fit`` (reduced-rank regression, or plain SVD of W if not ``weighted``)."""
    d_in, d_out = fit.weight.shape
    if not 1 <= rank <= min(d_in, d_out):
        raise LinrecError(f"rank must be between 1 and {min(d_in, d_out)} for a {d_in}x{d_out} map; got {rank}")
    w = fit.weight.to(train.cxx.device)
    if weighted:
        predicted = w.T @ train.cxx @ w
        _, vec = torch.linalg.eigh((predicted + predicted.T) / 2)
        q = vec[:, -rank:]  # top-k output directions of the predictions
        down, up = w @ q, q.T
    else:
        u, s, vh = torch.linalg.svd(w, full_matrices=False)
        down, up = u[:, :rank] * s[:rank], vh[:rank]
    bias = train.mean_y - train.mean_x @ down @ up
    return LowRankFFN(down, up, bias, dtype)


def mean_ffn(train: Moments, dtype: torch.dtype = torch.float32) -> MeanFFN:
    """The mean-ablation replacement: the block's mean output on the training rows."""
    return MeanFFN(train.mean_y, dtype)


def fit_replacements(
    moments: Mapping[int, list[Moments]],
    kind: str,
    rank: int | None = None,
    blocks: Sequence[int] | None = None,
    weighted: bool = True,
    rcond: float = DEFAULT_RCOND,
) -> dict[int, nn.Module]:
    """One replacement of ``kind`` per block, fitted on all captured folds.

    Perplexity is measured on separate evaluation text, so nothing is held out here.
    """
    if kind not in FROM_MOMENTS:
        raise LinrecError(
            f"unknown replacement kind '{kind}'; choose one of {', '.join(FROM_MOMENTS)} "
            f"(a poly comes from probes.seeded_poly)"
        )
    if (kind == "lowrank") != (rank is not None):
        raise LinrecError("give rank=k for kind 'lowrank', and only for it")
    chosen = sorted(moments) if blocks is None else list(blocks)
    missing = [b for b in chosen if b not in moments]
    if missing:
        raise LinrecError(f"no moments for blocks {missing}; captured blocks: {sorted(moments)}")
    out: dict[int, nn.Module] = {}
    for b in chosen:
        train = merge_folds(moments[b])
        if kind == "affine":
            out[b] = affine_ffn(fit_affine(train, rcond))
        elif kind == "lowrank":
            assert rank is not None  # checked above: kind 'lowrank' comes with a rank
            out[b] = low_rank_ffn(fit_affine(train, rcond), train, rank, weighted)
        elif kind == "mean":
            out[b] = mean_ffn(train)
        else:
            out[b] = ZeroFFN()
    return out


def param_table(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec = None) -> pd.DataFrame:
    """Per block: the replacement's class, numbers stored, the original FFN's, their ratio and the saving.

    ``ratio`` is original / replacement (8.0 means eight times fewer numbers; inf for removal).
    """
    rows = []
    for b in sorted(replacements):
        original = n_stored(ffn_site(model, b, spec)[2])
        params = n_stored(replacements[b])
        rows.append(
            {
                "block": b,
                "replacement": type(replacements[b]).__name__,
                "params": params,
                "original_params": original,
                "ratio": original / params if params else float("inf"),
                "saved": original - params,
            }
        )
    return pd.DataFrame(rows, columns=["block", "replacement", "params", "original_params", "ratio", "saved"])


def _device_of(module: nn.Module) -> torch.device | None:
    for t in list(module.parameters()) + list(module.buffers()):
        return t.device
    return None


@contextmanager
def swapped(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec = None) -> Iterator[nn.Module]:
    """Within the block, ``model`` runs with the FFN of each block ``b`` replaced by ``replacements[b]``.

    Replacements move to their FFN's device. On exit the original modules (the same objects)
    are put back, even if the body raised.
    """
    sites = {b: ffn_site(model, b, spec) for b in replacements}
    done: list[tuple[nn.Module, str, nn.Module]] = []
    try:
        for b, new in replacements.items():
            parent, attr, original = sites[b]
            device = _device_of(original)
            setattr(parent, attr, new.to(device) if device is not None else new)
            done.append((parent, attr, original))
        yield model
    finally:
        for parent, attr, original in reversed(done):
            setattr(parent, attr, original)
