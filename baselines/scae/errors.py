"""The one error type of the SCAE package: a clear one-line message for the command line."""


class ScaeError(Exception):
    """Bad input, a missing or foreign checkpoint, or a run that cannot go on."""
