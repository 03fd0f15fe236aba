"""What is done with a fitted block: swaps and perplexity, cross-feeding, bilinear probes, trained baselines."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
