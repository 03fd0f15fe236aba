"""linrec.models.gguf: GGUF files (llama.cpp's single-file checkpoints) as float32 transformers models, dequantised
once."""

from __future__ import annotations

import numpy as np
import pytest

from linrec import LinrecError
from linrec.cache import cache_dir
from linrec.models import gguf as gguf_module
from linrec.models.gguf import GgufInfo, check_gguf_architecture
from linrec.models.loading import load_pretrained


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
