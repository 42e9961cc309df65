"""memsight: a visualizer and doctor for the device memory of PyTorch and torch_npu jobs.

The window, the doctor and every command of the ``memsight`` program, from Python::

    import memsight

    with memsight.record("step.pickle"):          # record a training step (needs torch)
        train_step()

    for finding in memsight.analyze("step.pickle"):
        print(finding.title)
    memsight.show("step.pickle")                   # the window, without blocking

Everything but :func:`record` works without torch installed. Each call runs the native
``memsight`` program the wheel installed; errors come back as :class:`MemsightError` (and
:class:`InputError` for a file memsight cannot read) with the message the command line prints.
"""

from importlib.metadata import PackageNotFoundError, version

from ._api import Finding, Image, Source, analyze, diff, screenshot, show, stats
from ._binary import find_binary
from ._errors import InputError, MemsightError
from ._record import record

try:
    __version__ = version("memsight")
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "Finding",
    "Image",
    "InputError",
    "MemsightError",
    "Source",
    "analyze",
    "diff",
    "find_binary",
    "record",
    "screenshot",
    "show",
    "stats",
]
