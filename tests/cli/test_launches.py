"""``ecpa launches``: real launch directories made by ``ecpa run`` (one live, one ended)
listed with their verdicts, foreign entries skipped and reported, the caps said, a store
filled by ``ecpa ship`` listed the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests._launch_helpers import DRIVE, Launches, ecpa_cmd, launches, wait_status

__all__ = ["launches"]  # the fixture, used by name

pytestmark = pytest.mark.e2e  # every test runs the ecpa script


def listed(*args: str | Path) -> dict[str, Any]:
    out = ecpa_cmd("launches", *args, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def ended_launch(launches: Launches, runs: Path) -> Path:
    proc, directory = launches.start("true", evidence_dir=runs)
    assert proc.wait(timeout=60) == 0
    return directory


def test_live_and_ended_launches_with_foreign_entries(launches: Launches, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _, live = launches.start(*DRIVE, evidence_dir=runs)
    launches.logs(live)
    wait_status(live, True)
    ended = ended_launch(launches, runs)
    (runs / "notes.txt").write_text("not a launch")
    (runs / "launch-0123456789abcdeg").mkdir()  # not hex
    (runs / "launch-0123456789abcdef").write_text("a file")  # not a directory
    foreign = runs / "launch-fedcba9876543210"
    foreign.mkdir()
    os.chmod(foreign, 0o777)  # writable by others: refused as `ecpa status` refuses it

    doc = listed("--evidence-dir", runs)
    by_id = {entry["launch_id"]: entry for entry in doc["launches"]}
    assert set(by_id) == {live.name, ended.name}
    assert by_id[live.name]["runtime_effective"] is True
    assert by_id[live.name]["ended"] is False
    assert by_id[live.name]["ended_how"] is None
    assert by_id[live.name]["coverage"] == {"covered": 1, "slots": 1}
    assert isinstance(by_id[live.name]["started_at"], int)
    assert by_id[ended.name]["runtime_effective"] is False
    assert by_id[ended.name]["ended"] is True
    assert "exited with status 0" in by_id[ended.name]["ended_how"]
    skipped = {entry["name"]: entry["detail"] for entry in doc["skipped"]}
    assert set(skipped) == {
        "notes.txt",
        "launch-0123456789abcdeg",
        "launch-0123456789abcdef",
        foreign.name,
    }
    assert skipped["launch-0123456789abcdef"] == "not a directory"
    assert skipped[foreign.name].startswith("ECPA_INVALID_INPUT")
    assert doc["truncated"] == []

    text = ecpa_cmd("launches", "--evidence-dir", runs)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    [live_line] = [line for line in lines if line.startswith(live.name)]
    assert "runtime_effective: true" in live_line
    assert "ended: no" in live_line
    assert "coverage: 1/1" in live_line
    [ended_line] = [line for line in lines if line.startswith(ended.name)]
    assert "runtime_effective: false" in ended_line
    assert "ended: yes (" in ended_line
    assert sum(line.startswith("skipped: ") for line in lines) == 4


def test_limit_caps_the_launches_judged_and_says_so(launches: Launches, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first, second = ended_launch(launches, runs), ended_launch(launches, runs)
    doc = listed("--evidence-dir", runs, "--limit", "1")
    assert [e["launch_id"] for e in doc["launches"]] == [min(first.name, second.name)]
    assert doc["truncated"] == [f"{runs}: judged the first 1 of 2 launches"]
    text = ecpa_cmd("launches", "--evidence-dir", runs, "--limit", "1")
    assert f"note: {runs}: judged the first 1 of 2 launches" in text.stdout.splitlines()


def test_an_empty_directory_lists_nothing(tmp_path: Path) -> None:
    out = ecpa_cmd("launches", "--evidence-dir", tmp_path)
    assert (out.returncode, out.stdout) == (0, "no launches\n")
    assert listed("--evidence-dir", tmp_path) == {"launches": [], "skipped": [], "truncated": []}


@pytest.mark.parametrize(
    "args",
    [
        (),  # no source
        ("--evidence-dir", "does-not-exist"),
        ("--evidence-dir", ".", "--limit", "0"),
        ("--evidence-dir", ".", "--limit", "1001"),
        ("--db", "sqlite.db"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    out = ecpa_cmd("launches", *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("ecpa: ")


def test_help_has_examples() -> None:
    out = ecpa_cmd("launches", "--help")
    assert out.returncode == 0
    assert "ecpa launches --evidence-dir runs" in out.stdout
    assert "Exit status" in out.stdout


def test_a_shipped_launch_is_listed_from_the_store(
    pg_dsn: str, launches: Launches, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    ended = ended_launch(launches, runs)
    shipped = ecpa_cmd("ship", "--launch", ended, "--db", pg_dsn, "--once")
    assert shipped.returncode == 0, shipped.stderr
    doc = listed("--db", pg_dsn)
    [entry] = doc["launches"]
    assert entry["launch_id"] == ended.name
    assert entry["ended"] is True
    assert entry["runtime_effective"] is False
    assert entry["coverage"]["slots"] == 1
    judged = ecpa_cmd("status", "--db", pg_dsn, "--launch-id", ended.name, "--json")
    assert judged.returncode == 1, judged.stdout + judged.stderr
    stages = json.loads(judged.stdout)["lifecycle"]
    assert stages["enabled"]["state"] is True  # the stored launch.json, read
    assert stages["installed"]["state"] is False  # the test plan's digest: another build
    both = listed("--db", pg_dsn, "--evidence-dir", runs)
    assert [e["launch_id"] for e in both["launches"]] == [ended.name, ended.name]
    assert both["launches"][0]["source"] == str(runs)
