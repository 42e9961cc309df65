"""``memsight.record`` against a stand-in ``torch`` module: the recording calls in order, the
dump on exit and on an out-of-memory error (raised again), torchtitan's layout every N steps,
and a clear error without torch."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import memsight
import pytest


class OutOfMemoryError(RuntimeError):
    """Named as ``torch.cuda.OutOfMemoryError`` is."""


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """A stand-in ``torch`` with a CUDA device: returns the list its memory functions append
    their calls to. ``_dump_snapshot`` writes a file, as the real one does."""
    calls: list[tuple] = []
    memory = types.SimpleNamespace(
        _record_memory_history=lambda **kw: calls.append(("record", kw)),
        _dump_snapshot=lambda path: (calls.append(("dump", path)), Path(path).write_bytes(b"x")),
    )
    cuda = types.SimpleNamespace(
        is_available=lambda: True, memory=memory, OutOfMemoryError=OutOfMemoryError
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import torch_npu fails
    return calls


def test_a_block_is_recorded_and_dumped(
    torch: list[tuple], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "step.pickle"
    with memsight.record(path, max_entries=1234, stacks="all") as recorder:
        torch.append(("work",))
    assert torch == [
        ("record", {"max_entries": 1234, "stacks": "all"}),
        ("work",),
        ("dump", str(path)),
        ("record", {"enabled": None}),
    ]
    assert recorder.written == [path]
    assert f"memory snapshot written to {path}" in capsys.readouterr().err


def test_an_out_of_memory_error_is_dumped_then_raised_again(
    torch: list[tuple], tmp_path: Path
) -> None:
    path = tmp_path / "oom.pickle"

    @memsight.record(path)
    def train() -> None:
        torch.append(("work",))
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(OutOfMemoryError):
        train()
    assert [c[0] for c in torch] == ["record", "work", "dump", "record"]
    assert torch[2] == ("dump", str(path))
    assert torch[-1] == ("record", {"enabled": None})


def test_another_error_stops_recording_without_a_dump(torch: list[tuple], tmp_path: Path) -> None:
    with pytest.raises(KeyError), memsight.record(tmp_path / "x.pickle"):
        raise KeyError("batch")
    assert [c[0] for c in torch] == ["record", "record"]
    assert not (tmp_path / "x.pickle").exists()


def test_every_n_steps_in_torchtitan_s_layout(torch: list[tuple], tmp_path: Path) -> None:
    folder = tmp_path / "memory_snapshot"
    with pytest.raises(OutOfMemoryError), memsight.record(folder, every=2, rank=3) as recorder:
        for step in range(1, 6):
            recorder.step(step)
        raise OutOfMemoryError("out of memory")
    assert [p.relative_to(folder).as_posix() for p in recorder.written] == [
        "iteration_2/rank3_memory_snapshot.pickle",
        "iteration_4/rank3_memory_snapshot.pickle",
        "iteration_5_exit/rank3_memory_snapshot.pickle",
    ]
    assert all(p.is_file() for p in recorder.written)


def test_torch_npu_is_recorded_where_an_npu_is_present(
    torch: list[tuple], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    npu_calls: list[tuple] = []
    memory = types.SimpleNamespace(
        _record_memory_history=lambda **kw: npu_calls.append(("record", kw)),
        _dump_snapshot=lambda path: npu_calls.append(("dump", path)),
    )
    npu = types.SimpleNamespace(is_available=lambda: True, memory=memory)
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(npu=npu))
    with memsight.record(tmp_path / "npu.pickle"):
        pass
    assert [c[0] for c in npu_calls] == ["record", "dump", "record"]
    assert torch == []


def test_without_torch_record_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(memsight.MemsightError, match="needs PyTorch"), memsight.record():
        pass


def test_step_outside_the_block_says_so(torch: list[tuple], tmp_path: Path) -> None:
    recorder = memsight.record(tmp_path, every=1)
    with pytest.raises(memsight.MemsightError, match="inside its `with` block"):
        recorder.step()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="stacks"):
        memsight.record(stacks="cpp")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every"):
        memsight.record(every=0)
