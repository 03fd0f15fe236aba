"""Text to token batches: named corpora (offline and hub), the BPE tokenizer trained here, fixed-length windows."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
