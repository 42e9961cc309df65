"""Times memsight.analyze on a snapshot object against the same snapshot from a file, side by
side, in the Python environment the wheel is installed in.

    python scripts/bench_python_api.py FILE [--runs 5]

FILE is a snapshot pickle (e.g. `memsight gen --scenario transformer --events 1000000 -o FILE`).
The object is what `torch.cuda.memory._snapshot()` would return: FILE unpickled (plain data; a
restricted unpickler that refuses globals). Prints the median wall time of each way, alternating
runs, and their ratio; and the time to unpickle FILE in Python, for scale.
"""

from __future__ import annotations

import argparse
import io
import pickle
import statistics
import time
from pathlib import Path

import memsight


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ANN201
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def timed(f) -> float:  # noqa: ANN001
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    data = args.file.read_bytes()
    unpickle_s = timed(lambda: _NoGlobals(io.BytesIO(data)).load())
    snapshot = _NoGlobals(io.BytesIO(data)).load()
    events = sum(len(t) for t in snapshot.get("device_traces", []))
    from_file, from_object = [], []
    for _ in range(args.runs):
        from_file.append(timed(lambda: memsight.analyze(args.file)))
        from_object.append(timed(lambda: memsight.analyze(snapshot)))
    assert [f.to_json() for f in memsight.analyze(snapshot)] == [
        f.to_json() for f in memsight.analyze(args.file)
    ]
    file_s, object_s = statistics.median(from_file), statistics.median(from_object)

    def runs(times: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in times)

    size_mib = len(data) / 2**20
    print(
        f"{args.file.name}: {size_mib:.1f} MiB, {events} events; Python unpickles it in "
        f"{unpickle_s:.2f} s"
    )
    print(f"memsight.analyze(path)   median {file_s:.2f} s  (runs: {runs(from_file)})")
    print(f"memsight.analyze(object) median {object_s:.2f} s  (runs: {runs(from_object)})")
    print(f"object / path: {object_s / file_s:.2f}x")


if __name__ == "__main__":
    main()
