"""The version of linrec: here, below every layer, so that any module can name the code that ran."""

__version__ = "0.3.0"
