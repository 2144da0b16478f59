"""Errors that end a command with exit code 2 and one clear line."""

from __future__ import annotations


class SessionfixError(Exception):
    """Base class: the message is shown to the user as is."""


class InputError(SessionfixError):
    """A path cannot be read as a session file (missing, unreadable, not a regular file)."""


class NotASessionFile(InputError):
    """The bytes are not text JSONL (a database, an archive, compressed data, or lines that
    are mostly not JSON): no rule applies to them and no fix may touch them."""


class UsageError(SessionfixError):
    """Invalid options or arguments."""


class OutputError(SessionfixError):
    """The command's output could not be written (a closed stream, a full disk)."""


def described(error: OSError) -> str:
    """An OS error as a short lower-case phrase ("no space left on device")."""
    return (error.strerror or str(error)).lower()
