"""linrec.models.gguf: GGUF files (llama.cpp's single-file checkpoints) as float32 transformers models, dequantised
once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from linrec import LinrecError
from linrec.cache import cache_dir
from linrec.models import gguf as gguf_module
from linrec.models.gguf import GgufInfo, check_gguf_architecture, dequantised
from linrec.models.loading import load_pretrained

UNPACKING = "linrec: tiny.gguf: unpacking the GGUF file (Q8_0, 0.1 MB) into float32 weights, once; cached in "


def write_tiny_llama(path: Path) -> Path:
    """A two-block Llama GGUF file of width 64, its matrices quantised to Q8_0 and its tokenizer byte-level BPE with
    three merges: a file transformers dequantises as it does a real one, in a second."""
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(0)
    width, hidden, tokens = 64, 128, [*bytes_to_unicode().values(), "Ġt", "he", "Ġthe", "<|endoftext|>"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny llama")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for add, value in [("context_length", 128), ("embedding_length", width), ("block_count", 2),
                       ("feed_forward_length", hidden), ("head_count", 4), ("head_count_kv", 4),
                       ("rope_dimension_count", width // 4), ("vocab_size", len(tokens))]:  # fmt: skip
        getattr(writer, f"add_{add}")(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 1) + [3])
    writer.add_token_merges(["Ġ t", "h e", "Ġt he"])
    writer.add_bos_token_id(len(tokens) - 1)
    writer.add_eos_token_id(len(tokens) - 1)

    def add(name: str, *shape: int) -> None:
        values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if len(shape) == 1:  # norms stay float32, as llama.cpp keeps them
            writer.add_tensor(name, values)
        else:
            quantised = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, quantised, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    add("token_embd.weight", len(tokens), width)
    add("output_norm.weight", width)
    add("output.weight", len(tokens), width)
    for i in range(2):
        add(f"blk.{i}.attn_norm.weight", width)
        add(f"blk.{i}.ffn_norm.weight", width)
        for matrix in ("attn_q", "attn_k", "attn_v", "attn_output"):
            add(f"blk.{i}.{matrix}.weight", width, width)
        add(f"blk.{i}.ffn_gate.weight", hidden, width)
        add(f"blk.{i}.ffn_up.weight", hidden, width)
        add(f"blk.{i}.ffn_down.weight", width, hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    """(a tiny Llama GGUF file, transformers' own dequantisation of it, not through linrec or its cache)."""
    from transformers import AutoModelForCausalLM

    path = write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    fresh = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    return path, fresh.eval()


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own, so that the tiny file is unpacked in it first."""
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def assert_bit_identical(model: torch.nn.Module, fresh: torch.nn.Module, ids: torch.Tensor) -> None:
    """Every tensor of the two models' state the same (names, dtypes, every bit), and so the logits of ``ids``."""
    ours, theirs = model.state_dict(), fresh.state_dict()
    assert list(ours) == list(theirs)
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype == torch.float32 and torch.equal(ours[name], tensor), name
    with torch.no_grad():
        assert torch.equal(model(ids).logits, fresh(ids).logits)


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
        load_pretrained(str(path))
    assert not (cache_dir() / "gguf").is_dir() or not any((cache_dir() / "gguf").glob("mamba*"))
    with pytest.raises(LinrecError, match="'phi3' model"):  # transformers reads it, linrec has no layout for it
        check_gguf_architecture(GgufInfo("m.gguf", "0" * 64, "phi3", "MOSTLY_Q8_0", "m"))


def test_missing_gguf_package_is_named(tmp_path, monkeypatch):
    real_find = gguf_module.importlib.util.find_spec
    monkeypatch.setattr(
        gguf_module.importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real_find(name, *a)
    )
    with pytest.raises(LinrecError, match="pip install gguf"):
        gguf_module.read_gguf_info(tmp_path / "model.gguf")


def test_a_gguf_file_is_unpacked_once_saying_so_in_one_line_and_without_transformers_bars(tiny, fresh_cache, capfd):
    path, _ = tiny
    directory, info = dequantised(path)
    load_pretrained(str(path))  # from the cache, with no bar of its own either
    again, _ = dequantised(path)
    err = capfd.readouterr().err
    assert again == directory and directory.is_relative_to(fresh_cache / "gguf") and info.quantisation == "MOSTLY_Q8_0"
    assert err.count("linrec: ") == 1 and UNPACKING + str(fresh_cache / "gguf" / f"tiny-{info.sha256[:16]}") in err
    assert not any(bar in err for bar in ("de-quantizing", "Loading weights", "Writing model shards", "it/s"))


def test_cached_weights_are_transformers_dequantisation_bit_for_bit(tiny, fresh_cache):
    """Loaded from the cache (safetensors only, nothing pickled), the model is the one transformers dequantises from
    the file: every tensor equal to the last bit, float32, and so are the logits."""
    path, fresh = tiny
    model, tokenizer = load_pretrained(str(path))
    directory, _ = dequantised(path)
    assert [f.name for f in directory.glob("*.safetensors")] == ["model.safetensors"]
    assert not [*directory.glob("*.bin"), *directory.glob("*.pt")]
    assert_bit_identical(model, fresh, tokenizer("the the hello", return_tensors="pt")["input_ids"])


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_cache_entry_is_reported_and_unpacked_again(damage, tiny, fresh_cache, capfd):
    """A byte flipped among the weights (which safetensors would load without complaint) or a truncated file: one
    warning naming the entry, the file unpacked again (and announced again), and the weights loaded intact."""
    path, fresh = tiny
    directory, info = dequantised(path)
    weights = directory / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "flip":
        data[-5] ^= 0x40  # the last tensor's last bytes, past the header
    weights.write_bytes(data if damage == "flip" else data[: len(data) // 2])
    capfd.readouterr()
    with pytest.warns(UserWarning, match=r"damaged cache entry .*tiny-[0-9a-f]{16} .*; rebuilding it"):
        rebuilt, _ = dequantised(path)
    assert rebuilt != directory and UNPACKING in capfd.readouterr().err
    model, tokenizer = load_pretrained(str(path))
    assert_bit_identical(model, fresh, tokenizer("the hello", return_tensors="pt")["input_ids"])
