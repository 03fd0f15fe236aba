"""Models: loading by hub id or path, where each architecture keeps its FFN blocks, and the offline zoo."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
