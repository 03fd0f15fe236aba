"""What the analyses report against: the paper's reported values, and claims with a fixed verdict vocabulary."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
