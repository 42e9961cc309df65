"""Run the memsight doctor over many snapshots at once: every rank, every dumped step.

    python analyze_many.py FOLDER [--workers N]

prints one line per file (its worst finding) and the files that could not be read. Each
``memsight.analyze`` call runs the native program in its own process, so threads are enough:
the work runs in parallel outside Python's GIL.

On many machines, the same function runs as a task of Dask or Ray where the files are::

    import dask.bag
    findings = dask.bag.from_sequence(paths).map(analyze_one).compute()

    import ray
    analyze_remote = ray.remote(analyze_one)
    findings = ray.get([analyze_remote.remote(p) for p in paths])

(each worker needs ``pip install memsight``; nothing but the path travels to it, and a plain
list of dicts comes back).
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import memsight

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
PATTERNS = ("*.pickle", "*.pkl", "*.pickle.gz", "*.pkl.gz")


def snapshot_files(folder: Path) -> list[Path]:
    """Every snapshot file under ``folder``, at any depth, in name order."""
    return sorted({p for pattern in PATTERNS for p in folder.rglob(pattern)})


def analyze_one(path: str | Path) -> dict:
    """One file's findings as plain data (what ``analyze --json`` prints), or its error: a
    result that pickles, for Dask or Ray to carry back."""
    try:
        return {"file": str(path), "findings": [f.to_json() for f in memsight.analyze(path)]}
    except memsight.MemsightError as error:
        return {"file": str(path), "error": str(error)}


def analyze_many(paths: list[Path], workers: int | None = None) -> list[dict]:
    """``analyze_one`` on every path, ``workers`` at a time (default: the CPU count), in the
    order given."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(analyze_one, paths))


def worst(findings: list[dict]) -> dict | None:
    return min(findings, key=lambda f: SEVERITY_ORDER.get(f["severity"], 3), default=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    paths = snapshot_files(args.folder)
    if not paths:
        print(f"no snapshot files under {args.folder}", file=sys.stderr)
        return 2
    results = analyze_many(paths, args.workers)
    failed = [r for r in results if "error" in r]
    for r in results:
        if "error" in r:
            continue
        top = worst(r["findings"])
        line = "no findings" if top is None else f"[{top['severity']}] {top['title']}"
        print(f"{r['file']}: {len(r['findings'])} findings; {line}")
    for r in failed:
        print(f"{r['file']}: cannot analyse: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
