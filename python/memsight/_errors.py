"""The exceptions of the memsight API."""

from __future__ import annotations


class MemsightError(Exception):
    """memsight could not do what was asked; ``str(error)`` is the message its command line
    prints, and ``exit_status`` the status it exits with (``None`` where no program ran).

    Example::

        try:
            memsight.stats("run.pickle")
        except memsight.MemsightError as error:
            print(error)
    """

    def __init__(self, message: str, exit_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


class InputError(MemsightError, ValueError):
    """The input cannot be read or is not a recording memsight knows: a missing file, a file
    that is not a snapshot, a pickle that would run code (memsight never runs it), a truncated
    or corrupt file. The command line exits with status 2 for these.

    Example::

        >>> memsight.stats("notes.txt")
        Traceback (most recent call last):
        memsight.InputError: not a memory snapshot: not a pickle: it starts with text ...
    """
