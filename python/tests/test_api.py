"""The Python API, on the real fixtures and on broken input: the figures come from the
command line's own JSON (the API must give exactly it) and from the files."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
from pathlib import Path

import memsight
import pytest
from conftest import load_snapshot, skip_without_corpus


def snapshots() -> list[Path]:
    folder = skip_without_corpus()
    return sorted(p for p in (folder / "snapshots").iterdir() if p.suffix in (".pickle", ".pkl"))


def cli_json(*args: str) -> dict:
    out = subprocess.run([memsight.find_binary(), *args], capture_output=True, check=True).stdout
    return json.loads(out)


def test_the_program_runs_from_the_package() -> None:
    out = subprocess.run(
        [memsight.find_binary(), "--version"], capture_output=True, check=True, text=True
    ).stdout
    assert out.startswith(f"memsight {memsight.__version__}")


def test_analyze_gives_the_command_line_s_json_on_every_fixture() -> None:
    for path in snapshots():
        expected = [
            f
            for file in cli_json("analyze", "--json", str(path))["files"]
            for f in file["findings"]
        ]
        findings = memsight.analyze(path)
        assert [f.to_json() for f in findings] == expected, path.name
        for f, e in zip(findings, expected):
            assert (f.kind, f.severity, f.title, f.bytes) == (
                e["kind"],
                e["severity"],
                e["title"],
                e["bytes"],
            )


def test_stats_and_diff_give_the_command_line_s_json() -> None:
    a, b = [p for p in snapshots() if p.name.startswith("cuda_hanmin")][:2]
    assert memsight.stats(a) == cli_json("stats", "--json", str(a))
    assert memsight.diff(a, b) == cli_json("diff", "--json", str(a), str(b))
    assert memsight.diff(a, b, top=3) == cli_json("diff", "--json", "--top", "3", str(a), str(b))


@pytest.mark.parametrize(
    "name",
    [
        "cuda_hanmin_fwd.pickle",  # a training trace with stacks
        "npu_snapshot_with_multi_devices.pkl",  # torch_npu, several devices
        "cuda_tiny_notrace.pickle",  # state only
        "cuda_legacy_list.pkl",  # torch.cuda.memory_snapshot(): a list of segments
    ],
)
def test_a_snapshot_object_gives_the_same_findings_as_its_file(name: str) -> None:
    path = skip_without_corpus() / "snapshots" / name
    snapshot = load_snapshot(path)
    from_object = [f.to_json() for f in memsight.analyze(snapshot)]
    from_file = [f.to_json() for f in memsight.analyze(path)]
    assert from_object == from_file
    assert from_object, "a fixture with no finding proves nothing here"
    assert memsight.stats(snapshot)["devices"] == memsight.stats(path)["devices"]


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_screenshot_returns_a_png_of_the_requested_size() -> None:
    path = skip_without_corpus() / "snapshots" / "cuda_hanmin_fwd.pickle"
    for view, width, height in [("app", 900, 600), ("timeline", 640, 300), ("pool", 500, 420)]:
        image = memsight.screenshot(path, view=view, width=width, height=height)
        assert png_size(image.png) == (width, height), view
        assert image._repr_png_() == image.png
        assert (image.width, image.height) == (width, height)


def test_screenshot_and_show_without_a_source_use_the_bundled_demo() -> None:
    image = memsight.screenshot(width=320, height=200)
    assert png_size(image.png) == (320, 200)


def test_a_file_that_is_not_a_snapshot_raises_input_error(tmp_path: Path) -> None:
    text = tmp_path / "notes.pickle"
    text.write_text("hello")
    with pytest.raises(memsight.InputError) as caught:
        memsight.analyze(text)
    assert "not a memory snapshot" in str(caught.value)
    assert str(text) in str(caught.value)
    assert caught.value.exit_status == 2
    # The same words as the command line prints.
    cli = subprocess.run(
        [memsight.find_binary(), "analyze", str(text)], capture_output=True, text=True
    )
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"memsight: {caught.value}"


def test_a_missing_file_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(memsight.InputError, match="cannot read"):
        memsight.stats(tmp_path / "absent.pickle")
    with pytest.raises(memsight.InputError, match="cannot read"):
        memsight.show(tmp_path / "absent.pickle")


def test_a_pickle_with_code_in_it_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pickle"

    class Payload:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, (f"touch {marker}",))

    evil.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Payload()]]}, protocol=4))
    with pytest.raises(memsight.InputError) as caught:
        memsight.analyze(evil)
    assert not marker.exists()
    assert str(evil) in str(caught.value)


def test_a_truncated_snapshot_raises_input_error(tmp_path: Path) -> None:
    whole = (skip_without_corpus() / "snapshots" / "cuda_hanmin_fwd.pickle").read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(memsight.InputError):
        memsight.analyze(cut)


def test_an_object_that_is_not_a_snapshot_is_refused() -> None:
    with pytest.raises(TypeError, match="a path or a snapshot dict"):
        memsight.analyze(42)  # type: ignore[arg-type]
    with pytest.raises(memsight.InputError, match="cannot be pickled"):
        memsight.analyze({"segments": [], "device_traces": [[{"action": lambda: 0}]]})
    with pytest.raises(memsight.InputError, match="not a memory snapshot"):
        memsight.analyze({"hello": "world"})
