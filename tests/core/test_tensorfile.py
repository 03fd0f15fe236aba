"""Safetensors written one tensor at a time: read back exactly by safetensors itself, and refused when the
tensors do not repeat themselves."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from linrec.core.tensorfile import write_tensors
from linrec.errors import LinrecError


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a.cxx": torch.randn(5, 5, generator=g, dtype=torch.float64),
        "a.n": torch.tensor([7], dtype=torch.int64),
        "b.x": torch.randn(3, 4, generator=g).to(torch.float32),
        "b.half": torch.randn(3, generator=g).to(torch.bfloat16),
        "b.mask": torch.tensor([True, False, True]),
        "b.empty": torch.zeros(0, 4),
        "c.t": torch.randn(4, 3, generator=g, dtype=torch.float64).T,  # not contiguous
    }


def test_safetensors_reads_back_every_tensor_exactly(tmp_path):
    tensors = _tensors()
    path = tmp_path / "t.safetensors"
    write_tensors(path, lambda: iter(tensors.items()), metadata={"what": "test"})
    back = load_file(str(path))
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and torch.equal(back[name], t), name
    with safe_open(str(path), "pt") as f:
        assert f.metadata() == {"what": "test"}
        assert torch.equal(f.get_tensor("c.t"), tensors["c.t"])  # one tensor read alone


def test_tensors_are_made_on_demand_and_dropped(tmp_path):
    made = []

    def tensors():
        for i in range(3):
            made.append(i)
            yield f"t{i}", torch.full((2,), float(i))

    write_tensors(tmp_path / "t.safetensors", tensors)
    assert made == [0, 1, 2, 0, 1, 2]  # once for the header, once for the bytes
    assert load_file(str(tmp_path / "t.safetensors"))["t2"].tolist() == [2.0, 2.0]


def test_tensors_that_change_between_calls_are_refused(tmp_path):
    calls = iter([[("a", torch.zeros(3))], [("a", torch.zeros(4))]])
    with pytest.raises(LinrecError, match="differently the second time"):
        write_tensors(tmp_path / "t.safetensors", lambda: next(calls))
    calls = iter([[("a", torch.zeros(3)), ("b", torch.zeros(1))], [("a", torch.zeros(3))]])
    with pytest.raises(LinrecError, match="fewer tensors"):
        write_tensors(tmp_path / "u.safetensors", lambda: next(calls))


def test_a_name_given_twice_or_an_unknown_dtype_is_refused(tmp_path):
    with pytest.raises(LinrecError, match="given twice"):
        write_tensors(tmp_path / "t.safetensors", lambda: [("a", torch.zeros(1)), ("a", torch.zeros(1))])
    with pytest.raises(LinrecError, match="dtype"):
        write_tensors(tmp_path / "t.safetensors", lambda: [("a", torch.zeros(1, dtype=torch.complex64))])
