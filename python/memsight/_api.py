"""The API: analyze, stats, diff, show and screenshot, each running the native program."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from ._binary import find_binary, run
from ._errors import InputError

#: A recording: a path (a snapshot pickle, optionally ``.gz``; a torch_npu profiler folder; an
#: msMemScope recording), or a snapshot as ``torch.cuda.memory._snapshot()`` /
#: ``torch_npu.npu.memory._snapshot()`` return it (a ``dict``; a ``list`` of segments for
#: ``torch.cuda.memory_snapshot()``).
Source = Union[str, "os.PathLike[str]", dict, list]


@dataclass(frozen=True)
class Finding:
    """One finding of the doctor: what ``memsight analyze --json`` prints for it.

    ``kind`` is one of ``peak``, ``leak``, ``fragmentation``, ``oom``, ... ; ``severity`` is
    ``info``, ``warning`` or ``error``; ``bytes`` the figure the title quotes; ``evidence``
    says what in the file each claim rests on; ``breakdown`` lists bytes per category
    (parameter, gradient, optimizer state, activation, ...) where the finding has one.
    ``data`` holds every field of the JSON object, those not named here included.

    Example::

        for f in memsight.analyze("run.pickle"):
            print(f.severity, f.title)
            print("  ", f.suggestion)
    """

    kind: str
    severity: str
    title: str
    summary: str
    suggestion: str
    device: int | None
    bytes: int | None
    evidence: list[str]
    breakdown: list[dict[str, Any]]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            kind=data["kind"],
            severity=data["severity"],
            title=data["title"],
            summary=data.get("summary", ""),
            suggestion=data.get("suggestion", ""),
            device=data.get("device"),
            bytes=data.get("bytes"),
            evidence=list(data.get("evidence", [])),
            breakdown=list(data.get("breakdown", [])),
            data=data,
        )

    def to_json(self) -> dict[str, Any]:
        """The finding as ``memsight analyze --json`` prints it."""
        return self.data

    def __str__(self) -> str:
        return f"[{self.severity}] {self.title}"


@contextmanager
def _as_path(src: Source) -> Iterator[str]:
    """A path the native program can read for ``src``: the path itself, or a snapshot object
    pickled (protocol 4, as ``_dump_snapshot`` writes it) to a temporary file removed after."""
    if isinstance(src, (dict, list)):
        with tempfile.TemporaryDirectory(prefix="memsight-") as folder:
            path = os.path.join(folder, "snapshot.pickle")
            with open(path, "wb") as out:
                try:
                    pickle.dump(src, out, protocol=4)
                except (pickle.PicklingError, TypeError, AttributeError) as error:
                    raise InputError(
                        "the snapshot object cannot be pickled: it holds something other than "
                        f"plain dicts, lists, strings and numbers ({error})"
                    ) from error
            yield path
    elif isinstance(src, (str, os.PathLike)):
        yield os.fspath(src)
    else:
        raise TypeError(
            "memsight expects a path or a snapshot dict (torch.cuda.memory._snapshot()), "
            f"not {type(src).__name__}"
        )


def analyze(src: Source) -> list[Finding]:
    """Runs the doctor on a recording and returns its findings, most severe first.

    ``src`` is a path or the snapshot itself, so that no file needs writing::

        import memsight
        findings = memsight.analyze("rank0_memory_snapshot.pickle")
        findings = memsight.analyze(torch.cuda.memory._snapshot())
        for f in findings:
            print(f.title)

    Raises :class:`InputError` where the input is not a recording memsight can read.
    """
    with _as_path(src) as path:
        report = json.loads(run(["analyze", "--json", path]))
    return [Finding.from_json(f) for file in report["files"] for f in file["findings"]]


def stats(src: Source) -> dict[str, Any]:
    """Per device: events by action, final and peak bytes, warnings — ``memsight stats
    --json``.

    Example::

        >>> s = memsight.stats("run.pickle")
        >>> s["devices"][0]["peak_allocated_bytes"]
        43754773506
    """
    with _as_path(src) as path:
        return json.loads(run(["stats", "--json", path]))


def diff(
    a: Source,
    b: Source,
    *,
    device_a: int | None = None,
    device_b: int | None = None,
    top: int | None = None,
) -> dict[str, Any]:
    """What grew from ``a`` to ``b``, per call site and category at each peak (two snapshots) or
    per operator (two profiler runs or ranks) — ``memsight diff --json``.

    Example::

        d = memsight.diff("step100.pickle", "step200.pickle")
    """
    options: list[str] = []
    if device_a is not None:
        options += ["--device-a", str(device_a)]
    if device_b is not None:
        options += ["--device-b", str(device_b)]
    if top is not None:
        options += ["--top", str(top)]
    with _as_path(a) as path_a, _as_path(b) as path_b:
        return json.loads(run(["diff", "--json", *options, path_a, path_b]))


def show(src: Source | None = None) -> subprocess.Popen[bytes]:
    """Opens the memsight window on a recording (the bundled demo when ``None``) and returns
    at once; the window lives on after the caller's script ends. A snapshot object is written
    to a file the window reads (in the system's temporary folder, named in the window's
    title).

    Example::

        memsight.show("run.pickle")
        memsight.show(torch.cuda.memory._snapshot())
    """
    args: list[str] = []
    if src is None:
        pass
    elif isinstance(src, (dict, list)):
        handle, path = tempfile.mkstemp(prefix="memsight-", suffix=".pickle")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(src, out, protocol=4)
        args.append(path)
    elif isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if not os.path.exists(path):
            raise InputError(f"cannot read {path}: no such file or folder", 2)
        args.append(path)
    else:
        raise TypeError(
            f"memsight.show expects a path or a snapshot dict, not {type(src).__name__}"
        )
    return subprocess.Popen(
        [find_binary(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@dataclass(frozen=True)
class Image:
    """A PNG image; Jupyter draws it inline (``_repr_png_``).

    Example::

        image = memsight.screenshot("run.pickle", view="timeline", width=1200, height=500)
        image.save("timeline.png")
    """

    png: bytes
    width: int
    height: int

    def _repr_png_(self) -> bytes:
        return self.png

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the PNG to ``path``."""
        Path(path).write_bytes(self.png)


def screenshot(
    src: Source | None = None,
    *,
    view: Literal["app", "timeline", "pool", "diff"] = "app",
    width: int = 1400,
    height: int = 860,
    device: int | None = None,
    event: int | None = None,
    other: Source | None = None,
) -> Image:
    """Renders the app, or one of its charts, to a PNG without a display.

    ``src``: the recording (the bundled demo snapshot when ``None``). ``view``: ``app`` the
    whole window; ``timeline`` or ``pool`` that chart alone; ``diff`` the compare view of
    ``src`` and ``other``. ``event`` shows the pool right after that event.

    Example::

        memsight.screenshot("run.pickle", view="pool", event=1200)  # drawn inline in Jupyter
    """
    options = ["--view", view, "--width", str(width), "--height", str(height)]
    if device is not None:
        options += ["--device", str(device)]
    if event is not None:
        options += ["--event", str(event)]
    if view == "diff" and other is None:
        raise ValueError("view='diff' compares two recordings: pass other=")
    with tempfile.TemporaryDirectory(prefix="memsight-") as folder:
        png = os.path.join(folder, "screenshot.png")
        if src is None:
            run(["screenshot", *options, "-o", png])
            return Image(Path(png).read_bytes(), width, height)
        with _as_path(src) as path:
            if other is not None:
                with _as_path(other) as other_path:
                    run(["screenshot", *options, "-o", png, path, other_path])
            else:
                run(["screenshot", *options, "-o", png, path])
        return Image(Path(png).read_bytes(), width, height)
