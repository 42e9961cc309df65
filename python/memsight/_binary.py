"""Where the native ``memsight`` program is, and running it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from ._errors import InputError, MemsightError

_EXE = "memsight.exe" if sys.platform == "win32" else "memsight"


def _candidates() -> Iterator[Path]:
    yield Path(sysconfig.get_path("scripts")) / _EXE
    try:
        # Unknown where HOME is unset (a service, `env -i`): skipped then.
        yield Path(sysconfig.get_path("scripts", scheme=f"{os.name}_user")) / _EXE
    except (KeyError, AttributeError):
        pass
    # site-packages/memsight/_binary.py -> <prefix>/bin/memsight (a --target or --prefix install)
    here = Path(__file__).resolve().parent
    yield here.parent / "bin" / _EXE
    yield here.parents[3] / "bin" / _EXE


def find_binary() -> str:
    """The path of the native ``memsight`` program the wheel installed.

    Looked for, in order: ``$MEMSIGHT_BIN``; the scripts folder of this interpreter's install
    scheme (a virtual environment's ``bin/``); the user scheme's (``pip install --user``); the
    ``bin/`` beside this package's ``site-packages`` (``pip install --target``); ``PATH``.
    """
    override = os.environ.get("MEMSIGHT_BIN")
    if override:
        if not os.access(override, os.X_OK):
            raise MemsightError(f"MEMSIGHT_BIN={override} is not an executable file")
        return override
    candidates = list(_candidates())
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which(_EXE)
    if on_path:
        return on_path
    raise MemsightError(
        "the native memsight program was not found beside this Python package "
        f"(looked in {', '.join(str(c.parent) for c in candidates)} and on PATH); "
        "reinstall with `pip install --force-reinstall memsight`, or set MEMSIGHT_BIN"
    )


def run(args: list[str]) -> str:
    """Runs ``memsight ARGS`` and returns its standard output.

    Raises :class:`InputError` on exit status 2 (the file cannot be read or is not a snapshot)
    and :class:`MemsightError` on any other failure, with the message the program printed.
    """
    completed = subprocess.run(
        [find_binary(), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if completed.returncode == 0:
        return completed.stdout.decode("utf-8")
    message = completed.stderr.decode("utf-8", errors="replace").strip()
    message = message.removeprefix("memsight: ")
    if not message:
        message = f"memsight {args[0]} failed with exit status {completed.returncode}"
    if completed.returncode == 2:
        raise InputError(message, completed.returncode)
    raise MemsightError(message, completed.returncode)
