"""The exception type users see, so a CLI or notebook can report it without a traceback, and the warning
category of conditions that are not errors but that a user should act on."""


class LinrecError(ValueError):
    """Bad input or an unmet precondition, with a message that says what to do instead."""


class LinrecWarning(UserWarning):
    """A run that will work but not as intended (e.g. far slower), with a message that says how to fix it."""
