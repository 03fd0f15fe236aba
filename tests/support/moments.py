"""Planted rows (with a large offset if asked) and a block's rows gathered by hooks, for the moment tests."""

from __future__ import annotations

import torch

from linrec.core.moments import Moments
from linrec.models.arch import ffn_blocks


def _rows(n=600, d_in=7, d_out=5, seed=0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    x = (
        torch.randn(n, d_in, generator=g, dtype=torch.float64) * torch.linspace(0.1, 30, d_in, dtype=torch.float64)
        + offset
    )
    y = x @ torch.randn(d_in, d_out, generator=g, dtype=torch.float64) + torch.randn(
        n, d_out, generator=g, dtype=torch.float64
    )
    return x, y


def _close(a: Moments, b: Moments, tol: float) -> None:
    """``a`` and ``b`` agree to ``tol``: every field, Cyy whole where both hold it whole, else its diagonal."""
    assert a.n == b.n
    both_full = a.full_output and b.full_output
    for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy" if both_full else "output_ss"):
        ta, tb = getattr(a, f), getattr(b, f)
        assert torch.allclose(ta, tb, rtol=tol, atol=tol * tb.abs().max().item()), f


def hooked_rows(model, batches, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of one block over every window, (N, T, d), gathered by hooks of this test's own."""
    spec = ffn_blocks(model)[block]
    modules = dict(model.named_modules())
    xs, ys = [], []
    pre = modules[spec.input].register_forward_pre_hook(lambda _m, args: xs.append(args[0].detach()))
    post = modules[spec.output].register_forward_hook(lambda _m, _a, out: ys.append(out.detach()))
    try:
        with torch.no_grad():
            for batch in batches:
                model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    finally:
        pre.remove()
        post.remove()
    return torch.cat(xs).double(), torch.cat(ys).double()
