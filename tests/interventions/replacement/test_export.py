"""linrec.interventions.replacement.export: a replaced model written as one directory that plain transformers loads,
in a process that cannot import linrec, with linrec's logits; the linrec form where the class has no room, refused
if damaged."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoModelForCausalLM

import linrec
from linrec.errors import LinrecError
from linrec.interventions.replacement.directory import RECORD, load_replaced
from linrec.interventions.replacement.export import BUNDLED, EXPORT, _odd_complement, export, probe_ids

WITHOUT_LINREC = textwrap.dedent(
    """
    import sys, torch
    class NoLinrec:
        def find_spec(self, name, path=None, target=None):
            if name == "linrec" or name.startswith("linrec."):
                raise ImportError("linrec is not installed here")
    sys.meta_path.insert(0, NoLinrec())
    from transformers import AutoModelForCausalLM
    for directory in sys.argv[1:]:
        model = AutoModelForCausalLM.from_pretrained(directory).eval()
        with torch.no_grad():
            torch.save(model(torch.load(directory + ".ids.pt")).logits, directory + ".logits.pt")
        print(model.config.num_hidden_layers)
    """
)
"""Loads each exported directory given with plain transformers, linrec refused at import, and saves its logits on
the ids saved beside it."""


def _linrec_logits(directory, ids) -> torch.Tensor:
    model, _ = load_replaced(directory)
    with torch.no_grad():
        return model(ids).logits


def test_an_exported_checkpoint_loads_in_a_process_without_linrec_with_linrecs_logits(made, tmp_path):
    cases = {("gpt2", "affine"): 4, ("llama", "remove"): 2}
    outs = [export(made(*case), tmp_path / "-".join(case)) for case in cases]
    ids = [probe_ids(AutoModelForCausalLM.from_pretrained(out.directory)) for out in outs]
    for out, batch in zip(outs, ids, strict=True):
        assert out.form == "plain" and out.reasons == [] and not (out.directory / RECORD).exists()
        assert json.loads((out.directory / EXPORT).read_text())["form"] == "plain"
        torch.save(batch, f"{out.directory}.ids.pt")
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_LINREC, *(str(out.directory) for out in outs)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert list(map(int, run.stdout.split())) == list(cases.values())  # removed blocks: fewer layers
    for case, out, batch in zip(cases, outs, ids, strict=True):
        expected = _linrec_logits(made(*case), batch)
        found = torch.load(f"{out.directory}.logits.pt")
        assert (found - expected).abs().max() <= 1e-4 * expected.abs().max()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "kinds"),
    [
        ("gpt2", ("mean", "lowrank:4", "zero", "remove")),
        ("gpt_neox", ("affine", "mean", "remove")),
        ("llama", ("affine", "mean", "zero")),
        ("gemma3_text", ("zero", "remove")),
        ("qwen2", ("zero", "remove")),
    ],
)
def test_every_change_with_a_form_in_the_class_is_a_plain_checkpoint(made, tmp_path, family, kinds):
    for kind in kinds:
        directory = made(family, kind)
        out = export(directory, tmp_path / kind)
        ids = probe_ids(AutoModelForCausalLM.from_pretrained(out.directory))
        plain = AutoModelForCausalLM.from_pretrained(out.directory).eval()
        with torch.no_grad():
            found = plain(ids).logits
        expected = _linrec_logits(directory, ids)
        assert out.form == "plain" and (found - expected).abs().max() <= 1e-4 * expected.abs().max(), kind
        assert plain.config.num_hidden_layers == (2 if kind == "remove" else 4)


@pytest.mark.parametrize(
    ("family", "kind"), [("mistral", "affine"), ("gemma3_text", "mean"), ("gpt2", "first-apart:own")]
)
def test_a_change_without_a_form_is_the_linrec_form_which_loads_with_linrec_alone(made, tmp_path, family, kind):
    directory = made(family, kind)
    out = export(directory, tmp_path / "linrec-form")
    assert out.form == "linrec" and len(out.reasons) == 1 and out.reasons[0].startswith("blocks 1, 2: ")
    assert json.loads((out.directory / "config.json").read_text())["model_type"] == "linrec"
    with pytest.raises(ValueError, match="model type `linrec`"):
        AutoModelForCausalLM.from_pretrained(out.directory)
    record = json.loads((out.directory / RECORD).read_text())
    assert record["base"]["bundled"] == BUNDLED and f"{BUNDLED}/model.safetensors" in record["files"]
    ids = probe_ids(AutoModelForCausalLM.from_pretrained(out.directory / BUNDLED))
    assert torch.equal(_linrec_logits(out.directory, ids), _linrec_logits(directory, ids))


def test_a_damaged_base_inside_the_linrec_form_is_refused(made, tmp_path):
    out = export(made("mistral", "affine"), tmp_path / "linrec-form").directory
    weights = out / BUNDLED / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100:-90] = bytes(255 - b for b in data[-100:-90])
    weights.write_bytes(bytes(data))
    with pytest.raises(LinrecError, match="base/model.safetensors is damaged: its sha256"):
        linrec.load_model(str(out))


def test_the_pair_identity_holds_for_the_activations_that_carry_a_map_and_no_other():
    from transformers.activations import ACT2FN

    for name in ("relu", "gelu", "gelu_new", "gelu_pytorch_tanh", "silu", "quick_gelu"):
        assert _odd_complement(ACT2FN[name]), name
    for name in ("tanh", "sigmoid", "relu2"):
        assert not _odd_complement(ACT2FN[name]), name
