"""The offline model zoo: small causal LMs of the paper's three families, trained here from scratch.

One model per family the paper measures, all of the same width, depth and FFN width, so that
GPT-2 against GPT-NeoX mirrors the paper's "same width, same activation" comparison:

=============  ======================================  ==================================
family         block                                   as in
=============  ======================================  ==================================
``gpt2``       LayerNorm, GELU (tanh), sequential      GPT-2 (tied embeddings)
``gpt_neox``   LayerNorm, GELU, parallel residual      Pythia (rotary on 25% of dims)
``llama``      RMSNorm, gated SiLU (SwiGLU)            llama-160m (FFN width 4x, untied)
=============  ======================================  ==================================

plus a second seed of GPT-2, to tell what training learns from what a seed decides. The seed
sets both the initialisation and the order of training batches; families with the same seed see
exactly the same batches.

Training data is a weighted mix of the offline corpora's fit texts (their eval texts stay held
out): 45% prose, 45% code and 10% records, so that all three domains of the robustness chapter are
in distribution, as the paper's domains are for its models. It is tokenised with a byte-level BPE
trained on the same texts (:mod:`linrec.data.bpe`). Each model
is trained by AdamW with linear warm-up and cosine decay, without dropout, and saved with
``save_pretrained`` (safetensors, with its tokenizer) at init, at several intermediate steps and
at the end, so ``AutoModelForCausalLM.from_pretrained(path)`` and ``linrec.load_model(path)``
load any checkpoint.

Determinism and speed. A model is trained by one process on one thread with deterministic
algorithms, so its weights depend on its config and data only, not on the machine's core count;
two models train at a time (``workers``), which uses two cores better than one model on two
threads, since matrices this small parallelise poorly within an operation.

Cache. Everything is cached under :func:`linrec.cache.cache_dir` (``$LINREC_CACHE``, else
``$XDG_CACHE_HOME/linrec``, else ``~/.cache/linrec``): ``tokenizers/<key>``, ``data/<key>`` (the
tokenised texts) and ``zoo/<model>-<key>``, each key a hash of everything that decides the
content (entry config, corpus hashes, tokenizer settings, :data:`ZOO_FORMAT`). Results are
written to a temporary directory and made the entry's current version when complete, under a
per-key lock, and verified against their checksums when read (see :mod:`linrec.cache`), so an
interrupted build is never taken for a finished one, two builds never train the same model, a
damaged entry is named and rebuilt, and ``--force`` never shows a reader a half-replaced model.
``<model dir>/zoo.json`` records the training statistics.

Modules: :mod:`~linrec.models.zoo.spec` (what the zoos are), :mod:`~linrec.models.zoo.train`
(training one model), :mod:`~linrec.models.zoo.build` (cache layout, workers, the zoo's table).
The command ``linrec zoo`` is :mod:`linrec.commands.zoo`.
"""

from linrec.models.zoo.build import (
    ZooLayout,
    build_zoo,
    default_workers,
    ensure_zoo_model,
    prepare_zoo,
    zoo_missing,
    zoo_model_path,
    zoo_record,
    zoo_table,
)
from linrec.models.zoo.spec import FAMILIES, OFFLINE_MIX, ZOO_FORMAT, ZOOS, ZooEntry, ZooSpec, get_zoo, model_config
from linrec.models.zoo.train import TrainJob, ZooData, eval_loss, train_entry

__all__ = [
    "FAMILIES",
    "OFFLINE_MIX",
    "ZOO_FORMAT",
    "ZOOS",
    "TrainJob",
    "ZooData",
    "ZooEntry",
    "ZooLayout",
    "ZooSpec",
    "build_zoo",
    "default_workers",
    "ensure_zoo_model",
    "eval_loss",
    "get_zoo",
    "model_config",
    "prepare_zoo",
    "train_entry",
    "zoo_missing",
    "zoo_model_path",
    "zoo_record",
    "zoo_table",
]
