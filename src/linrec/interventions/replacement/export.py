"""A replaced model that leaves linrec: ``linrec export`` writes one self-contained directory, weights and tokenizer.

Where every change of a replacement directory can be written in the base model's own transformers class, the
directory is a **plain checkpoint**: ``AutoModelForCausalLM.from_pretrained(dir)`` loads it, nothing of linrec
needed. What each change becomes there (:func:`fold`):

* ``remove``: the block's decoder layer leaves the model (:func:`linrec.interventions.removal.remove`): fewer layers,
  fewer numbers, faster decoding;
* ``zero``: the FFN's output projection set to zero (any family);
* ``mean``: that projection's weight zero and its bias the mean output;
* ``affine``, ``lowrank:K``: the map ŷ = B·(Ax) + b (A: the map's input side, r rows; B: its output side) written
  into the FFN's own layers through the identity f(z) − f(−z) = z, which holds for every activation of the form
  z·g(z) with g(z) + g(−z) = 1 (ReLU, GELU and its tanh form, SiLU; checked on the model's own activation): the
  first layer computes [Ax; −Ax] in 2r of its hidden units, the second [B, −B] with bias b. A gated FFN (Llama) gets
  its up projection constant 1 through its bias. Exact in exact arithmetic, to rounding in floating point.

The last two need the output projection's bias (GPT-2, GPT-NeoX; Llama once its config's ``mlp_bias`` is turned on,
which gives every FFN zero biases, a few numbers per block) and, for a map, 2r hidden units. Such an FFN keeps its
size: a transformers class has one FFN width for every layer, so only removed blocks make the checkpoint smaller.

Where a change cannot be written so (``first-apart`` kinds, a Mistral, Qwen2 or Gemma 3 FFN that has no bias, an
activation without the identity, GPT-2's ``scale_attn_by_inverse_layer_idx`` under removal), the directory is the
**linrec form**: the base model saved whole in ``base/`` with its tokenizer, the maps, and the replacement record
with every file's sha256 (:func:`linrec.load_model` loads it, no network or base model needed); its ``config.json``
says what to install, so transformers' own error names linrec.

Either form is checked before it is kept: it is loaded back (transformers itself for the plain form) and its logits
on a seeded batch of token ids compared with linrec's replaced model in the same dtype; the largest difference is in
``linrec-export.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from linrec.cache import hash_file
from linrec.core.capture import input_device
from linrec.core.replacements import AffineFFN, LowRankFFN, MeanFFN, RemovedBlock, ZeroFFN
from linrec.errors import LinrecError
from linrec.files import new_directory
from linrec.interventions.removal import remove
from linrec.interventions.replacement.directory import MAPS, RECORD, REPORT, load_base, read_replaced
from linrec.interventions.surgery import ffn_site, install, swapped
from linrec.models.packaged import PACKAGED

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

EXPORT = "linrec-export.json"
"""What an export holds beside the model: its form, what became of each block, and the logits check."""

BUNDLED = "base"
"""The linrec form's folder holding the base model whole."""

_LAYERS: dict[str, tuple[str, str, str | None, str]] = {
    "gpt2": ("c_fc", "c_proj", None, "act"),
    "gpt_neox": ("dense_h_to_4h", "dense_4h_to_h", None, "act"),
    **{t: ("gate_proj", "down_proj", "up_proj", "act_fn") for t in ("llama", "mistral", "qwen2", "gemma3_text")},
}
"""Per family, the FFN's (first layer, output projection, gated up projection or None, activation) attributes."""

TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}
"""The largest logit difference an export may show against linrec's model, relative to the largest logit (16-bit
dtypes: 2e-2, their rounding)."""


@dataclass(frozen=True)
class Exported:
    """Where an export went, its form (``plain`` or ``linrec``), why it is not plain, and the logits check."""

    directory: Path
    form: str
    reasons: list[str]
    max_logit_difference: float


def _layer_weight(layer: Any) -> torch.Tensor:
    """A layer's weight as (out, in), whether ``nn.Linear`` or GPT-2's ``Conv1D`` (stored (in, out))."""
    return layer.weight if isinstance(layer, nn.Linear) else layer.weight.T


def _set(layer: Any, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Set a layer's weight ((out, in)) and bias (None: zero, where it has one)."""
    with torch.no_grad():
        target = _layer_weight(layer)
        target.copy_(weight.to(target.dtype))
        if layer.bias is not None:
            layer.bias.copy_(torch.zeros_like(layer.bias) if bias is None else bias.to(layer.bias.dtype))


def _odd_complement(activation: nn.Module) -> bool:
    """Whether f(z) − f(−z) = z holds for ``activation`` (checked in float64 from −30 to 30)."""
    z = torch.linspace(-30, 30, 6001, dtype=torch.float64)
    try:
        gap = activation(z) - activation(-z) - z
    except (RuntimeError, TypeError):
        return False
    return bool(gap.abs().max() <= 1e-9 * 30)


def _sides(replacement: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, B, b) of a map ŷ = B·(Ax) + b: A (r, d_in), B (d_out, r), in float64."""
    if isinstance(replacement, AffineFFN):
        weight = replacement.weight.double()
        return weight, torch.eye(weight.shape[0], dtype=torch.float64), replacement.bias.double()
    assert isinstance(replacement, LowRankFFN)
    return replacement.down.double(), replacement.up.double(), replacement.bias.double()


def not_plain(model: nn.Module, maps: Mapping[int, nn.Module]) -> list[str]:
    """Why ``maps`` cannot be written in ``model``'s own class, one reason per line (none: a plain checkpoint)."""
    config: Any = model.config
    reasons: list[str] = []
    by_block: dict[str, list[int]] = {}
    if any(isinstance(r, RemovedBlock) for r in maps.values()) and getattr(
        config, "scale_attn_by_inverse_layer_idx", False
    ):
        reasons.append("removing a block renumbers the layers, and this GPT-2 scales attention by the layer's index")
    for b, r in maps.items():
        reason = _no_form(model, b, r)
        if reason is not None:
            by_block.setdefault(reason, []).append(b)
    for reason, blocks in by_block.items():
        reasons.append(f"block{'s' * (len(blocks) > 1)} {', '.join(map(str, sorted(blocks)))}: {reason}")
    return reasons


def _no_form(model: nn.Module, block: int, replacement: nn.Module) -> str | None:
    """Why ``replacement`` has no form in block ``block``'s FFN of ``model``'s class, or None."""
    model_type = getattr(model.config, "model_type", None)
    if isinstance(replacement, RemovedBlock | ZeroFFN):
        return None
    if model_type not in _LAYERS or type(replacement) not in (MeanFFN, AffineFFN, LowRankFFN):
        return f"a {type(replacement).__name__} has no form in {model_type}'s FFN"
    first, out, up, act = _LAYERS[model_type]
    mlp = ffn_site(model, block)[2]
    if getattr(mlp, out).bias is None and not (model_type == "llama" and up is not None):
        return f"{model_type}'s FFN output has no bias to hold the map's"
    if isinstance(replacement, MeanFFN):
        return None
    rank = _sides(replacement)[0].shape[0]
    hidden = _layer_weight(getattr(mlp, first)).shape[0]
    if 2 * rank > hidden:
        return f"a rank-{rank} map needs {2 * rank} hidden units, the FFN has {hidden}"
    if not _odd_complement(getattr(mlp, act)):
        return "the FFN's activation does not satisfy f(z) − f(−z) = z"
    return None


def _with_mlp_bias(model: nn.Module) -> None:
    """Turn on a Llama model's ``mlp_bias``: every FFN layer gets a bias of zeros (what the config then builds)."""
    config: Any = model.config
    if config.mlp_bias:
        return
    for module in model.modules():
        if type(module).__name__ == "LlamaMLP":
            for name in ("gate_proj", "up_proj", "down_proj"):
                layer = getattr(module, name)
                layer.bias = nn.Parameter(layer.weight.new_zeros(layer.weight.shape[0]), requires_grad=False)
    config.mlp_bias = True


def fold(model: nn.Module, maps: Mapping[int, nn.Module]) -> nn.Module:
    """Write ``maps`` into ``model``'s own layers for good (module docstring); refused unless :func:`not_plain` finds
    nothing. ``model`` is returned (with fewer layers where blocks were removed)."""
    reasons = not_plain(model, maps)
    if reasons:
        raise LinrecError("these replacements have no form in the model's own class: " + "; ".join(reasons))
    config: Any = model.config
    first, out, up, _ = _LAYERS.get(config.model_type, ("", "", None, ""))
    if any(not isinstance(r, RemovedBlock | ZeroFFN) for r in maps.values()) and config.model_type == "llama":
        _with_mlp_bias(model)
    for b, r in maps.items():
        if isinstance(r, RemovedBlock):
            continue
        mlp = ffn_site(model, b)[2]
        hidden_out = _layer_weight(getattr(mlp, out))
        if isinstance(r, ZeroFFN | MeanFFN):
            _set(getattr(mlp, out), torch.zeros_like(hidden_out), r.mean if isinstance(r, MeanFFN) else None)
            continue
        a, b_side, bias = _sides(r)
        rank, hidden = a.shape[0], hidden_out.shape[1]
        first_w = torch.zeros(hidden, a.shape[1], dtype=torch.float64)
        first_w[:rank], first_w[rank : 2 * rank] = a, -a
        out_w = torch.zeros(b_side.shape[0], hidden, dtype=torch.float64)
        out_w[:, :rank], out_w[:, rank : 2 * rank] = b_side, -b_side
        _set(getattr(mlp, first), first_w, None)
        _set(getattr(mlp, out), out_w, bias)
        if up is not None:  # a gated FFN: its up projection constant 1
            upper = getattr(mlp, up)
            _set(upper, torch.zeros_like(_layer_weight(upper)), torch.ones(hidden))
    return remove(model, [b for b, r in maps.items() if isinstance(r, RemovedBlock)])


def probe_ids(model: nn.Module, length: int = 48, seed: int = 0) -> torch.Tensor:
    """A seeded (2, ``length``) batch of token ids across the vocabulary: what an export's logits are compared on."""
    config: Any = model.config
    length = min(length, getattr(config, "max_position_embeddings", length) or length)
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (2, length), generator=generator)


def _logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids.to(input_device(model))).logits.float().cpu()


def _difference(expected: torch.Tensor, found: torch.Tensor, dtype: torch.dtype, what: str) -> float:
    """The largest logit difference relative to the largest logit; a LinrecError beyond :data:`TOLERANCE`."""
    relative = float((found - expected).abs().max() / expected.abs().max().clamp_min(1e-30))
    if relative > TOLERANCE.get(dtype, 2e-2):
        raise LinrecError(
            f"the {what} does not reproduce linrec's replaced model: its logits differ by {relative:.3g} of the "
            "largest; nothing was written (please report this, with the replacement directory)"
        )
    return relative


def _save_model(model: Any, tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def export(
    directory: str | Path, out: str | Path, *, dtype: str | None = None, force: bool = False, device: str | None = None
) -> Exported:
    """Write the replacement directory ``directory`` as one self-contained directory ``out`` (module docstring): a
    plain checkpoint where every change has a form in the base model's class, else the linrec form. ``dtype``: the
    weights' dtype (default: the base model's own, as its config names it, else the one it was replaced in)."""
    from transformers import AutoModelForCausalLM

    directory, out = Path(directory).expanduser(), Path(out).expanduser()
    record, maps = read_replaced(directory)
    model, tokenizer = load_base(record, directory, dtype=dtype or _own_dtype(record, directory), device=device)
    weights_dtype = next(model.parameters()).dtype
    ids = probe_ids(model)
    with swapped(model, maps):
        expected = _logits(model, ids)
    reasons = not_plain(model, maps)
    blocks = [{"block": b["block"], "kind": b["kind"]} for b in record["blocks"]]
    with new_directory(out, "--out", force) as tmp:
        if not reasons:
            _save_model(fold(model, maps), tokenizer, tmp)
            del model
            found = _logits(AutoModelForCausalLM.from_pretrained(tmp, dtype=weights_dtype).eval(), ids)
            form = "plain"
        else:
            _save_model(model, tokenizer, tmp / BUNDLED)
            del model
            shutil.copyfile(directory / MAPS, tmp / MAPS)
            if (directory / REPORT).is_file():
                shutil.copyfile(directory / REPORT, tmp / REPORT)
            bundled = {**record, "base": {**record["base"], "bundled": BUNDLED, "dtype": str(weights_dtype)[6:]}}
            files = {p.relative_to(tmp).as_posix(): hash_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
            (tmp / RECORD).write_text(json.dumps({**bundled, "files": files}, indent=1) + "\n", encoding="utf-8")
            (tmp / "config.json").write_text(json.dumps(_pointer(), indent=1) + "\n", encoding="utf-8")
            found = _logits(install(load_base(bundled, tmp)[0], maps), ids)
            form = "linrec"
        difference = _difference(expected, found, weights_dtype, f"{form} checkpoint")
        note = {
            "form": form,
            "reasons": reasons,
            "source": str(directory.resolve()),
            "base": record["base"]["model"],
            "dtype": str(weights_dtype)[6:],
            "blocks": blocks,
            "max_logit_difference": difference,
            "load": "AutoModelForCausalLM.from_pretrained(DIR)" if form == "plain" else "linrec.load_model(DIR)",
        }
        (tmp / EXPORT).write_text(json.dumps(note, indent=1) + "\n", encoding="utf-8")
    return Exported(out, form, reasons, difference)


def _own_dtype(record: dict, directory: Path) -> str:
    """The base model's own dtype as its config names it (a local checkpoint's ``config.json``, or a hub model's
    config already downloaded), else the one it was replaced in (a GGUF file or packaged model: dequantised)."""
    from transformers import AutoConfig

    from linrec.interventions.replacement.directory import base_source

    source = Path(base_source(record["base"], directory)).expanduser()
    named = None
    if (source / "config.json").is_file():
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
        named = config.get("dtype") or config.get("torch_dtype")
    elif not source.exists() and record["base"]["model"] not in PACKAGED:
        try:
            named = AutoConfig.from_pretrained(str(source), local_files_only=True).dtype
        except (OSError, ValueError, KeyError):  # not in the hub cache: no network is asked
            named = None
    return str(named).removeprefix("torch.") if named else record["base"]["dtype"]


def _pointer() -> dict:
    """The linrec form's ``config.json``: no model transformers knows, and what to install to load it."""
    return {
        "model_type": "linrec",
        "linrec": {
            "what": "a model with FFN blocks replaced by linrec (the base model whole in base/, the maps beside it)",
            "install": "pip install linrec (https://github.com/linrec-book/linrec)",
            "load": "linrec.load_model(DIR), DIR this directory (or linrec measure --model DIR)",
        },
    }
