"""The example that analyses many snapshots in parallel (python/examples/analyze_many.py), on
hundreds of generated files and a broken one; and the same function as Dask tasks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import memsight
import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "analyze_many.py"
FILES = 200


def load_example():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location("analyze_many", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 small generated snapshots in torchtitan's layout (50 steps × 4 ranks, each a leak
    on a different seed), and one file that is not a snapshot."""
    folder = tmp_path_factory.mktemp("memory_snapshot")
    binary = memsight.find_binary()

    def generate(i: int) -> None:
        out = folder / f"iteration_{i // 4}" / f"rank{i % 4}_memory_snapshot.pickle"
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                binary,
                "gen",
                "--scenario",
                "leak",
                "--events",
                "3000",
                "--seed",
                str(i + 1),
                "-o",
                str(out),
            ],
            check=True,
            capture_output=True,
        )

    with ThreadPoolExecutor() as pool:
        list(pool.map(generate, range(FILES)))
    (folder / "iteration_0" / "rank9_memory_snapshot.pickle").write_bytes(b"\x80\x04not a snapshot")
    return folder


def test_analyze_many_reads_every_file_and_reports_the_broken_one(run_folder: Path) -> None:
    example = load_example()
    paths = example.snapshot_files(run_folder)
    assert len(paths) == FILES + 1
    results = example.analyze_many(paths, workers=4)
    assert [r["file"] for r in results] == [str(p) for p in paths]
    failed = [r for r in results if "error" in r]
    assert [Path(r["file"]).name for r in failed] == ["rank9_memory_snapshot.pickle"]
    assert "rank9_memory_snapshot.pickle" in failed[0]["error"]
    analysed = [r for r in results if "findings" in r]
    assert len(analysed) == FILES
    # Each generated file leaks (its ground truth says so): the doctor finds a leak in each.
    leaks = [r for r in analysed if any(f["kind"] == "leak" for f in r["findings"])]
    assert len(leaks) == FILES
    # The same findings as one call at a time.
    one = analysed[7]
    assert one["findings"] == [f.to_json() for f in memsight.analyze(one["file"])]


def test_the_example_s_command_line(run_folder: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(run_folder)], capture_output=True, text=True
    )
    assert done.returncode == 1  # one file could not be read
    assert len(done.stdout.splitlines()) == FILES
    assert "rank9_memory_snapshot.pickle: cannot analyse" in done.stderr


def test_as_dask_tasks(run_folder: Path) -> None:
    dask_bag = pytest.importorskip("dask.bag")
    example = load_example()
    paths = example.snapshot_files(run_folder)[:20]
    results = dask_bag.from_sequence(paths, npartitions=4).map(example.analyze_one).compute()
    assert results == example.analyze_many(paths)


def test_as_ray_tasks(run_folder: Path) -> None:
    ray = pytest.importorskip("ray")
    example = load_example()
    paths = example.snapshot_files(run_folder)[:8]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        analyze_remote = ray.remote(example.analyze_one)
        results = ray.get([analyze_remote.remote(p) for p in paths])
    finally:
        ray.shutdown()
    assert results == example.analyze_many(paths)
