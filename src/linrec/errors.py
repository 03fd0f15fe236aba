"""The one exception type users see, so a CLI or notebook can report it without a traceback."""


class LinrecError(ValueError):
    """Bad input or an unmet precondition, with a message that says what to do instead."""
