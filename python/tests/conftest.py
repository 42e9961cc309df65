"""Shared by the tests of the Python package: the real-file corpus, and a restricted unpickler."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def fixtures_dir() -> Path | None:
    """``$MEMSIGHT_FIXTURES``, else ``../shared/fixtures`` beside the repository; ``None``
    where the corpus is absent (a user's clone)."""
    folder = Path(os.environ.get("MEMSIGHT_FIXTURES", REPO.parent / "shared" / "fixtures"))
    return folder if (folder / "snapshots").is_dir() else None


def skip_without_corpus() -> Path:
    folder = fixtures_dir()
    if folder is None:
        # Counted by scripts/check.sh's closing line as skipped (from pytest's summary).
        pytest.skip("skipped: corpus not found")
    return folder


class _NoGlobals(pickle.Unpickler):
    """A snapshot is plain data: anything that names a global is refused, never run."""

    def find_class(self, module: str, name: str):  # noqa: ANN201
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def load_snapshot(path: Path):  # noqa: ANN201
    """The snapshot object a fixture file holds, as ``torch.cuda.memory._snapshot()`` would
    return it (gzip-compressed files are opened too)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        import gzip

        data = gzip.decompress(data)
    return _NoGlobals(io.BytesIO(data)).load()
