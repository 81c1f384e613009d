"""The one error the twin raises: a sentence that says what failed, where to look, and what to do."""


class TwinError(RuntimeError):
    """The twin could not be built, started or used; the message names the pod, file or command."""
