"""Experiments: named profiles (what runs), their resolution into models, corpora and batches, cached measurements."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
