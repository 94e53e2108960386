"""The benchmark's error class: bad input or state that a user can fix.

The CLI turns it into a one-line message and a non-zero exit; nothing else
catches it.
"""


class BenchmarkError(Exception):
    """A clear, user-facing problem (unknown method, missing checkpoint, old record...)."""
