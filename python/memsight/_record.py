"""``memsight.record``: record a snapshot around a block of training code."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Literal

from ._errors import MemsightError

Stacks = Literal["python", "all"]


def _memory_module() -> tuple[str, ModuleType]:
    """The device's memory module: ``torch_npu.npu.memory`` where torch_npu is installed and
    an NPU is present, else ``torch.cuda.memory``."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as error:
        raise MemsightError(
            "memsight.record needs PyTorch (torch) or torch_npu in this environment; everything "
            "else in memsight works without them"
        ) from error
    try:
        torch_npu = importlib.import_module("torch_npu")
    except ImportError:
        torch_npu = None
    if torch_npu is not None and torch_npu.npu.is_available():
        return "npu", torch_npu.npu.memory
    if torch.cuda.is_available():
        return "cuda", torch.cuda.memory
    raise MemsightError(
        "memsight.record found no device to record: torch.cuda.is_available() is False"
        + ("" if torch_npu is None else " and so is torch_npu.npu.is_available()")
    )


def _is_out_of_memory(error: BaseException) -> bool:
    """An out-of-memory error of either device (``torch.cuda.OutOfMemoryError``, or torch_npu's
    ``RuntimeError: NPU out of memory``)."""
    return type(error).__name__ == "OutOfMemoryError" or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower()
    )


class record(contextlib.ContextDecorator):  # noqa: N801 - used like a function
    """Records the device's memory while the block (or decorated function) runs, and writes a
    snapshot memsight opens when it ends — also when it ends with an out-of-memory error, which
    is then raised again. Works on CUDA and on Ascend NPUs (torch_npu), whichever is present.

    ``path``: the file to write (``memory_snapshot.pickle`` by default). ``max_entries``: how
    many allocation events the recording keeps (the last ones); ``stacks``: ``"python"`` for
    Python frames only (cheaper), ``"all"`` for Python and C++ frames.

    Once a block::

        with memsight.record("step.pickle"):
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()

    As a decorator::

        @memsight.record("train.pickle", max_entries=1_000_000)
        def train(): ...

    Every N steps, in torchtitan's layout (``FOLDER/iteration_N/rankR_memory_snapshot.pickle``,
    and ``iteration_N_exit/`` on an out-of-memory error) — a run ``memsight`` opens whole::

        with memsight.record("memory_snapshot", every=100, rank=rank) as recorder:
            for step in range(1, steps + 1):
                train_step()
                recorder.step(step)

    Where the snapshot went is printed to standard error and kept in ``recorder.written``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "memory_snapshot.pickle",
        *,
        max_entries: int = 100_000,
        stacks: Stacks = "python",
        every: int | None = None,
        rank: int | None = None,
    ) -> None:
        if stacks not in ("python", "all"):
            raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
        if every is not None and every < 1:
            raise ValueError(f"every must be a positive number of steps, not {every}")
        self.path = Path(path)
        self.max_entries = max_entries
        self.stacks = stacks
        self.every = every
        self.rank = rank
        self.written: list[Path] = []
        self._step = 0
        self._memory: ModuleType | None = None

    def _dump(self, path: Path) -> None:
        if self._memory is None:
            raise MemsightError("memsight.record: step() dumps only inside its `with` block")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._memory._dump_snapshot(str(path))
        self.written.append(path)
        print(
            f"memsight: memory snapshot written to {path} (open it: memsight {path})",
            file=sys.stderr,
        )

    def _step_path(self, suffix: str = "") -> Path:
        rank = 0 if self.rank is None else self.rank
        return self.path / f"iteration_{self._step}{suffix}" / f"rank{rank}_memory_snapshot.pickle"

    def step(self, step: int | None = None) -> None:
        """Marks the end of a training step (``step``: its number; by default one more than the
        last). With ``every=N``, dumps the snapshot after every N-th step; otherwise does
        nothing."""
        self._step = self._step + 1 if step is None else step
        if self.every is not None and self._step % self.every == 0:
            self._dump(self._step_path())

    def __enter__(self) -> record:
        _, self._memory = _memory_module()
        self._memory._record_memory_history(max_entries=self.max_entries, stacks=self.stacks)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        try:
            if error is not None and _is_out_of_memory(error):
                self._dump(self._step_path("_exit") if self.every is not None else self.path)
            elif error is None and self.every is None:
                self._dump(self.path)
        finally:
            if self._memory is not None:
                self._memory._record_memory_history(enabled=None)
            self._memory = None
        return False

    def __repr__(self) -> str:
        args: dict[str, Any] = {"max_entries": self.max_entries, "stacks": self.stacks}
        if self.every is not None:
            args.update(every=self.every, rank=self.rank)
        options = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"memsight.record({str(self.path)!r}, {options})"
