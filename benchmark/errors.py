"""The benchmark's error class: bad input or state that a user can fix.

The CLI turns it into a one-line message and a non-zero exit; nothing else
catches it.
"""


class BenchmarkError(Exception):
    """A clear, user-facing problem (unknown method, missing checkpoint, old record...)."""


class StopLine(BenchmarkError):
    """A stop (Ctrl-C, SIGTERM) ended the command: the text is what it leaves behind and what
    the same command does now, the line to print instead of the generic resume hint."""
