"""Chapter 4 (bilinear): the planted controls the real blocks' probes are read against.

* :func:`probe_controls`: the probe on planted residuals at the chapter's budget and width, which bracket
  the real blocks: a rank-r quadratic (it must capture nearly all of it), the residuals of random GELU and
  SwiGLU FFNs (what a generic, untrained FFN gives at this width: mostly quadratic, not of low rank) and an
  odd cubic with no quadratic part (it must capture none). Without them a small captured share cannot be
  told from a probe that cannot learn, nor from what any FFN of this width would show.
* :func:`gate_reference`: seeded-poly on a planted block whose quadratic residual the probe captures, the
  case against which a falling gate is read.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd
import torch

from linrec.core.sample import Rows
from linrec.errors import LinrecError
from linrec.experiment.results import cached_frames
from linrec.interventions.probes import (
    ProbeConfig,
    bilinear_probe,
    bilinear_probes,
    probes_summary,
    seeded_poly,
)

CONTROLS = {
    "quadratic": "a rank-r quadratic the probe can represent: captures nearly all (≥ 0.9)",
    "gelu-mlp": "a random GELU FFN's residual: what a generic FFN at this width gives",
    "swiglu-mlp": "a random SwiGLU FFN's residual: what a generic FFN at this width gives",
    "odd": "an odd cubic with no quadratic part: captures none (≈ 0)",
}
"""The planted residuals of :func:`probe_controls`, highest expected share first, and what each is for."""

FFN_CONTROLS = ("gelu-mlp", "swiglu-mlp")
"""The middle controls: untrained FFNs, whose residual is mostly quadratic but not of low rank."""


def planted_residual(
    kind: str, n: int = 6000, d: int = 32, rank: int = 8, share: float = 0.3, seed: int = 0, sequence: int = 40
) -> Rows:
    """Rows with a known residual: x ~ N(0, I), y = x W + r(x) + 3 % noise, r with its least-squares linear part
    removed and scaled to carry about ``share`` of the output variance; five folds of ``sequence``-row
    "sequences" (consecutive rows).

    ``kind="quadratic"``: r = P((Ux) ⊙ (Vx)) of rank ``rank``, which a bilinear probe of rank ≥ ``rank`` can
    represent exactly. ``kind="gelu-mlp"``: r = GELU(x W₁) W₂, a random FFN of hidden width 4d (GPT-2's shape;
    W₁ ~ N(0, 1/d), W₂ ~ N(0, 1/4d)); ``kind="swiglu-mlp"``: r = (SiLU(x W_g) ⊙ x W_u) W_d of hidden width
    8d/3 (Llama's shape). ``kind="odd"``: r = Σ_k p_k He₃(u_k·x) with He₃(z) = z³ - 3z along ``rank`` unit
    directions: odd in x, so uncorrelated with every quadratic of the symmetric inputs, and with no linear part
    either, so the closed form leaves all of it and no quadratic can take any of it.
    """
    if kind not in CONTROLS:
        raise LinrecError(f"unknown planted residual '{kind}'; choose one of {', '.join(CONTROLS)}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    linear = x @ torch.randn(d, d, generator=g) / d**0.5
    if kind == "quadratic":
        u, v = torch.randn(rank, d, generator=g) / d**0.5, torch.randn(rank, d, generator=g) / d**0.5
        residual = ((x @ u.T) * (x @ v.T)) @ torch.randn(rank, d, generator=g)
    elif kind == "gelu-mlp":
        hidden = 4 * d
        w1, w2 = torch.randn(d, hidden, generator=g) / d**0.5, torch.randn(hidden, d, generator=g) / hidden**0.5
        residual = torch.nn.functional.gelu(x @ w1) @ w2
    elif kind == "swiglu-mlp":
        hidden = round(8 * d / 3)
        gate, up = torch.randn(2, d, hidden, generator=g) / d**0.5
        residual = (torch.nn.functional.silu(x @ gate) * (x @ up)) @ torch.randn(hidden, d, generator=g) / hidden**0.5
    else:
        u = torch.randn(rank, d, generator=g)
        z = x @ (u / u.norm(dim=1, keepdim=True)).T
        residual = (z**3 - 3 * z) @ torch.randn(rank, d, generator=g)
    ones = torch.ones(n, 1, dtype=torch.float64)
    design = torch.cat([x.to(torch.float64), ones], dim=1)
    r64 = residual.to(torch.float64)
    residual = (r64 - design @ torch.linalg.lstsq(design, r64).solution).to(torch.float32)
    residual = residual / residual.std() * linear.std() * (share / (1 - share)) ** 0.5
    y = linear + residual + 0.03 * linear.std() * torch.randn(n, d, generator=g)
    return Rows(x, y, torch.arange(n) // sequence % 5)


CONTROL_SEQUENCE = 40
"""Rows per planted "sequence" in :func:`probe_controls` (what its cluster bootstrap resamples)."""


def probe_controls(
    config: ProbeConfig, d: int, rank: int = 8, seed: int = 0, seeds: int = 2, cache: bool = False
) -> pd.DataFrame:
    """The bilinear probe (``config``, the chapter's, with ``seeds`` probe seeds as on the real blocks) on each
    planted residual of :func:`planted_residual` at width ``d`` (pass the chapter's: how much of a random FFN's
    residual a rank-r probe captures falls with the width). ``cache``: computed once per setting and kept in the
    cache (:func:`linrec.experiment.results.cached_frames`), as the probes on measured blocks are.

    Columns: ``control, kind, expected, r2_lin, gain, captured, captured_low, captured_high, steps, at_budget``.
    """

    def compute() -> dict[str, pd.DataFrame]:
        rows = []
        for kind, expected in CONTROLS.items():
            planted = planted_residual(kind, d=d, rank=rank, seed=seed, sequence=CONTROL_SEQUENCE)
            results, share = bilinear_probes(planted, config=config, sequence_rows=CONTROL_SEQUENCE, seeds=seeds)
            rows.append(
                {
                    "control": f"{kind} residual" + (f" (rank {rank})" if kind in ("quadratic", "odd") else ""),
                    "kind": kind,
                    "expected": expected,
                    **probes_summary(results, share),
                }
            )
        return {"controls": pd.DataFrame(rows)}

    if not cache:
        return compute()["controls"]
    content = {"config": asdict(config), "d": d, "rank": rank, "seed": seed, "seeds": seeds,
               "controls": CONTROLS, "sequence": CONTROL_SEQUENCE}  # fmt: skip
    return cached_frames("probe-controls", content, compute)["controls"]


CONTROL_CAPTURED, CONTROL_NONE = 0.9, 0.05
""":func:`controls_pass`'s bounds: the probe captures ≥ 0.9 of a residual it can represent (the rank-8 quadratic
at the 30 % share of :func:`planted_residual` leaves room for its noise and early stopping) and within 0.05 of 0
of one with no quadratic part."""


def controls_pass(controls: pd.DataFrame, captured: float = CONTROL_CAPTURED, none: float = CONTROL_NONE) -> bool:
    """Whether the probe works at this budget: it captured at least ``captured`` of the quadratic residual and
    within ``none`` of 0 of the odd one (rows of :func:`probe_controls`)."""
    kinds = controls.set_index("kind").captured
    return bool(kinds["quadratic"] >= captured and abs(kinds["odd"]) <= none)


def ffn_reference(controls: pd.DataFrame) -> tuple[float, float]:
    """The interval of what the probe captures of a random FFN's residual at this width: from the lowest
    ``captured_low`` to the highest ``captured_high`` of the FFN controls (:data:`FFN_CONTROLS`)."""
    ffn = controls[controls.kind.isin(FFN_CONTROLS)]
    if ffn.empty:
        raise LinrecError(f"the controls hold no random-FFN residual ({', '.join(FFN_CONTROLS)})")
    return float(ffn.captured_low.min()), float(ffn.captured_high.max())


def gate_reference(config: ProbeConfig, seeded: ProbeConfig, d: int, rank: int = 8, seed: int = 0) -> dict[str, float]:
    """Seeded-poly (``seeded``) and the bilinear probe (``config``) on the planted block of the quadratic control
    (:func:`planted_residual`, a rank-``rank`` quadratic carrying 30 % of the variance) at width ``d``: a block
    where the term is needed (its RMS is about √(0.3 / 0.7) ≈ 0.65 output RMS units, six times the initial gate)
    and the probe can capture it. The reference is not near-linear because at the zoo's width the probe captures
    none of a quadratic residual of a near-linear block's size (4 % of the variance: 0.00 at d = 128, 0.97 at
    d = 16), so such a block could not serve. ``r2_lin, captured`` (the bilinear probe's share), ``gate``
    (seeded-poly's |g|)."""
    planted = planted_residual("quadratic", d=d, rank=rank, seed=seed, sequence=CONTROL_SEQUENCE)
    plain = bilinear_probe(planted, config=config, sequence_rows=CONTROL_SEQUENCE)
    return {"r2_lin": plain.r2_lin, "captured": plain.captured.value, "gate": seeded_poly(planted, config=seeded).gate}
