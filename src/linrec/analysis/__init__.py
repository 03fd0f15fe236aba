"""One module per chapter's analysis, turning measurements into tables and claims (each docstring names its chapter)."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
