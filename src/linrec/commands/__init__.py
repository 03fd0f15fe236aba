"""Subcommands of the `linrec` command line."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
