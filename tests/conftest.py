"""Shared fixtures: a locally trained tokenizer, local text and tiny random models of every supported family."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")  # every figure the tests draw, off screen

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""

pytest_plugins = [
    "support.cli",
    "support.crossfeed",
    "support.hub_corpora",
    "support.measurement_store",
    "support.pitfall",
    "support.removal",
    "support.replace",
    "support.surgery",
    "support.zoo",
]
"""The shared fixtures of tests in several folders (tests/support)."""

VOCAB = 320


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny models and small training steps run several times faster on one intra-op thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (otherwise in collection order): with ``-n`` (``make test-all``) the long ones start
    early and the short ones fill the workers' gaps, rather than one long test starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


USER_CACHE = os.environ.get("LINREC_CACHE")
"""The user's ``$LINREC_CACHE`` as the tests started (None: unset, so ~/.cache/linrec)."""


@pytest.fixture(autouse=True, scope="session")
def own_cache(tmp_path_factory):
    """Every test writes to a cache of its session, never into the user's ``$LINREC_CACHE`` (nor ~/.cache/linrec),
    except within :func:`user_cache`; a test that needs a particular cache still sets its own."""
    os.environ["LINREC_CACHE"] = str(tmp_path_factory.mktemp("linrec-cache"))
    yield
    if USER_CACHE is None:
        os.environ.pop("LINREC_CACHE", None)
    else:
        os.environ["LINREC_CACHE"] = USER_CACHE


@contextmanager
def user_cache() -> Iterator[None]:
    """Within the block ``$LINREC_CACHE`` is the user's own cache: the one exception to :func:`own_cache`, for the
    real packaged models, whose joined GGUF file and float32 weights (entries keyed by the file's sha256, the very
    ones the book makes and reads) take a minute or two to build, so once per machine and not once per session."""
    with pytest.MonkeyPatch.context() as patch:
        if USER_CACHE is None:
            patch.delenv("LINREC_CACHE")
        else:
            patch.setenv("LINREC_CACHE", USER_CACHE)
        yield


WIDTH = 32


def local_text(n_words: int = 30_000, seed: int = 0) -> str:
    """Deterministic pseudo-English built on this machine (no download)."""
    rng = random.Random(seed)
    words = (
        "the of and to in is that for it as with was on be by this are from at or an which have not "
        "model block layer linear map feed forward residual stream token input output weight bias norm "
        "measure fit held out variance explained rank probe gate swap perplexity corpus text data"
    ).split()
    lines, line = [], []
    for _ in range(n_words):
        line.append(rng.choice(words))
        if len(line) >= rng.randint(6, 14):
            lines.append(" ".join(line).capitalize() + ".")
            line = []
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def text() -> str:
    return local_text()


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory, text) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [text],
        trainers.BpeTrainer(
            vocab_size=VOCAB, special_tokens=["<|pad|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>")
    path = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def tiny_config(family: str):
    """A 2-layer, width-32 config of ``family`` (the same classes as the paper's models)."""
    import transformers as tf

    common = dict(
        vocab_size=VOCAB,
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=WIDTH,
        intermediate_size=4 * WIDTH,
        max_position_embeddings=64,
    )
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=VOCAB, n_layer=2, n_head=4, n_embd=WIDTH, n_positions=64)
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(**common)
    if family == "llama":
        return tf.LlamaConfig(**common)
    if family == "mistral":
        return tf.MistralConfig(**common, num_key_value_heads=2)
    if family == "qwen2":
        return tf.Qwen2Config(**common, num_key_value_heads=2)
    if family == "gemma3_text":  # Gemma 3's text model: GeGLU FFNs between two RMSNorms, one local and one global layer
        return tf.Gemma3TextConfig(
            **common,
            num_key_value_heads=2,
            head_dim=8,
            hidden_activation="gelu_pytorch_tanh",
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
        )
    if family == "bert":
        return tf.BertConfig(**common)
    if family == "roberta":
        return tf.RobertaConfig(**dict(common, max_position_embeddings=80), pad_token_id=0)
    if family == "opt":
        return tf.OPTConfig(
            vocab_size=VOCAB,
            num_hidden_layers=2,
            num_attention_heads=4,
            hidden_size=WIDTH,
            ffn_dim=4 * WIDTH,
            max_position_embeddings=64,
            word_embed_proj_dim=WIDTH,
        )
    raise ValueError(family)


FAMILIES = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma3_text", "bert", "roberta", "opt")


def tiny_model(family: str, seed: int = 0):
    """A randomly initialised tiny model of ``family`` in eval mode, float32."""
    from transformers import AutoModel, AutoModelForCausalLM

    from linrec.models.arch import CAUSAL

    torch.manual_seed(seed)
    config = tiny_config(family)
    auto = AutoModelForCausalLM if family in CAUSAL else AutoModel
    return auto.from_config(config).eval().requires_grad_(False)


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory, tokenizer) -> dict[str, Path]:
    """Every supported family saved with save_pretrained next to the local tokenizer."""
    dirs = {}
    for family in FAMILIES:
        path = tmp_path_factory.mktemp(family)
        tiny_model(family).save_pretrained(path)
        tokenizer.save_pretrained(path)
        dirs[family] = path
    return dirs


@pytest.fixture
def no_weights(monkeypatch):
    """Loading any weights fails the test: the errors it checks must come from the config and tokenizer alone."""
    import transformers

    def from_pretrained(*args, **kwargs):
        raise AssertionError("loaded weights before the error")

    for auto in (transformers.AutoModel, transformers.AutoModelForCausalLM):
        monkeypatch.setattr(auto, "from_pretrained", from_pretrained)


def measurement_info(model: str, checkpoint: str = "final", corpus: str = "local", folds: int = 5, rows: int = 0):
    """A MeasurementInfo for measurements the tests assemble by hand (the fields they do not use are placeholders)."""
    from linrec.experiment.measurement import MeasurementInfo

    return MeasurementInfo(
        profile="test",
        model=model,
        checkpoint=checkpoint,
        corpus=corpus,
        corpus_sha256="",
        rows=rows,
        seq_len=0,
        folds=folds,
        seed=0,
        sample_rows=0,
        dtype="torch.float32",
        device="cpu",
        capture_s=0.0,
        torch=torch.__version__,
    )


def book_script(name: str):
    """The module ``book/<name>.py`` (the build's scripts are not a package)."""
    import importlib.util

    path = ROOT / "book" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"book_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # registered before it runs, as an import would (dataclasses look it up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def legible_figures(request, monkeypatch):
    """Every figure a test draws, in the book's style, must be legible at the book's column width
    (:func:`linrec.plots.legibility.problems`: no text over text, none under 8 pt as shown), checked as the test
    closes it or, left open, as the test ends. A test that plants an illegible figure checks it itself and marks
    itself ``illegible_on_purpose``."""
    if request.node.get_closest_marker("illegible_on_purpose"):
        yield
        return
    import matplotlib as mpl
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from linrec.plots import use_book_style
    from linrec.plots.legibility import problems

    found: dict[int, list[str]] = {}
    close = plt.close
    before = set(plt.get_fignums())  # figures other tests left open are theirs
    saved = mpl.rcParams.copy()
    use_book_style()  # drawn as the book draws them: seaborn's notebook fonts

    def checked(fig=None) -> None:
        numbers = (
            plt.get_fignums() if fig == "all" else [fig.number if isinstance(fig, Figure) else fig or plt.gcf().number]
        )
        found.update({n: problems(plt.figure(n)) for n in numbers if n in plt.get_fignums() and n not in before})
        close(fig)

    monkeypatch.setattr(plt, "close", checked)
    yield
    checked("all")
    mpl.rcParams.update(saved)
    assert not any(found.values()), f"illegible figures: { {n: p for n, p in found.items() if p} }"
