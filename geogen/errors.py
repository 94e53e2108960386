"""The project error for bad input: the CLI turns it into a one-line message and exit 1."""


class GeogenError(Exception):
    """A user-facing problem (bad argument, unusable folder, corrupt shard): one line, no traceback."""
