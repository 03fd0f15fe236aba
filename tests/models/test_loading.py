"""Loading fails before the weights, with a message naming the file and what to do: devices, paths, weights,
tokenizers."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT
from linrec.models.loading import available_devices, load_pretrained, pick_device
from linrec.models.packaged import installed_models, offline_hint


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def gpt2_dir(tmp_path, tokenizer):
    path = tmp_path / "gpt2"
    tiny_model("gpt2").save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps", "tpu", "nonsense"])
def test_unavailable_device_names_the_available_ones(device, no_accelerator):
    assert available_devices() == ["cpu"]
    with pytest.raises(LinrecError, match=f"device '{device}' is not available on this machine; available: cpu\\."):
        pick_device(device)


def test_default_device_is_the_first_available(no_accelerator):
    assert pick_device() == torch.device("cpu") == pick_device("cpu")


def test_device_is_checked_before_loading(no_accelerator, tmp_path):
    """The directory holds nothing loadable: the device error comes first, so nothing was read."""
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(LinrecError, match="device 'cuda' is not available"):
        load_pretrained(str(tmp_path), device="cuda")


@pytest.mark.parametrize(
    "name", ["./no/such/model", "../no-such-model", "/no/such/model", "~/no-such-linrec-model", "a/b/c"]
)
def test_nonexistent_local_path_is_no_such_directory(name):
    with pytest.raises(LinrecError, match="no such directory: ") as err:
        load_pretrained(name)
    assert "could not load" not in str(err.value)  # not reported as a hub error


def test_path_under_an_existing_directory_is_local(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    with pytest.raises(LinrecError, match="no such directory: 'models/mine'"):
        load_pretrained("models/mine")


def test_a_file_is_not_a_model_directory(gpt2_dir):
    with pytest.raises(LinrecError, match="is a file; give the model's directory"):
        load_pretrained(str(gpt2_dir / "config.json"))


def test_config_without_weights(gpt2_dir):
    (gpt2_dir / "model.safetensors").unlink()
    with pytest.raises(LinrecError, match="has a config but no weights .*save_pretrained"):
        load_pretrained(str(gpt2_dir))


@pytest.mark.parametrize("keep", [0.5, 0.0001])
def test_truncated_safetensors_names_the_file(gpt2_dir, keep):
    weights = gpt2_dir / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: max(4, int(len(data) * keep))])
    with pytest.raises(LinrecError, match=f"{weights} is truncated or corrupt .*save or download it again"):
        load_pretrained(str(gpt2_dir))


def test_damaged_weights_are_reported_before_the_work_that_runs_before_the_weights(gpt2_dir):
    """The plan is made (and printed) in ``before_weights``: a truncated checkpoint fails before it, not after."""
    weights = gpt2_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    planned = []
    with pytest.raises(LinrecError, match="is truncated or corrupt"):
        load_pretrained(str(gpt2_dir), before_weights=lambda config, tokenizer: planned.append(config))
    assert planned == []


def test_model_without_tokenizer(tmp_path):
    tiny_model("gpt2").save_pretrained(tmp_path)
    with pytest.raises(LinrecError, match="has no usable tokenizer .*tokenizer.save_pretrained"):
        load_pretrained(str(tmp_path))


def test_unsupported_architecture_is_refused_before_the_weights(tmp_path, tokenizer):
    """Only a config and a tokenizer: with supported_only the architecture is the error, not the missing weights."""
    from transformers import GPTJConfig

    GPTJConfig(vocab_size=320, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(LinrecError, match="unsupported architecture 'gptj'. Supported model types: gpt2, gpt_neox"):
        load_pretrained(str(tmp_path), supported_only=True)
    with pytest.raises(LinrecError, match="has a config but no weights"):
        load_pretrained(str(tmp_path))  # the Python API still loads any architecture (measured with a spec)


def test_loads_a_good_directory(gpt2_dir):
    model, tokenizer = load_pretrained(str(gpt2_dir), device="cpu", supported_only=True)
    assert not model.training and next(model.parameters()).device.type == "cpu"
    assert tokenizer("model block", add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"device_map": "bogus"}, "device_map must be one of auto, balanced, balanced_low_0, sequential or a device"),
        ({"device_map": "cuda:3"}, "device_map must be one of"),
        ({"device_map": "auto", "device": "cpu"}, "both say where the model goes"),
    ],
)
def test_device_map_is_checked_before_loading(kwargs, message, no_accelerator, tmp_path):
    """As for the device: the directory holds nothing loadable, so the error comes before anything is read."""
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(LinrecError, match=message):
        load_pretrained(str(tmp_path), **kwargs)


def test_a_device_map_naming_this_machine_s_device_loads(gpt2_dir):
    model, _ = load_pretrained(str(gpt2_dir), device_map="cpu")
    assert next(model.parameters()).device == torch.device("cpu")


@pytest.mark.parametrize("offline", ["1", ""])
def test_a_hub_model_out_of_reach_names_the_packaged_models_installed_here(offline, monkeypatch):
    """Offline, or with the hub unreachable, the error ends by naming what runs without a network: the packaged
    models this environment has installed, then the offline profile."""
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: unreachable
    with pytest.raises(LinrecError, match="could not load 'no-such-org/no-such-model' from the hub") as err:
        load_pretrained("no-such-org/no-such-model")
    assert str(err.value).endswith(f"\n{offline_hint()}") and OFFLINE_HINT in str(err.value)
    assert all(f" {name}" in offline_hint() for name in installed_models())
