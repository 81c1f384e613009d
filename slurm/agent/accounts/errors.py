"""One error type for every reason the reconcile stops, so both command lines report it the same way."""

from __future__ import annotations


class AccountsError(RuntimeError):
    """The reconcile cannot go on; the message says why and, where it can, what to do."""
