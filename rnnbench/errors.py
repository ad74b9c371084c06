"""The one exception type the CLI turns into a one-line message and exit code 2."""


class UsageError(Exception):
    """A user input is wrong (a target, a kind, a file, an option); the message says which."""
