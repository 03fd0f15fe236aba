"""The measurement: capture (X, Y) rows, float64 moments, the closed-form fit and its held-out R², row samples."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
