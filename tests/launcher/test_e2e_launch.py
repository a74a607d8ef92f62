"""The whole loop with real processes: ``ecpa run -- python -m dla_plugin.drive`` puts the DLA
plugin and its observer in a scheduler process; ``ecpa status --launch`` derives
``runtime_effective`` from the signed evidence alone (RUNTIME.md "Deriving
runtime_effective")."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ecpa.launcher.run import BINDING_NAMES
from ecpa.profile.trust import TrustStore
from ecpa.runtime.judge.derive import RuntimeStatus, derive_launch
from ecpa.runtime.model.evidence import read_log
from ecpa.runtime.model.launch import launch_from_file
from ecpa.runtime.model.process import Liveness
from tests.support import ROOT, codes, texts

pytestmark = pytest.mark.e2e  # real processes throughout

ECPA = Path(sys.executable).parent / "ecpa"
PLAN = {
    "schema": "ecpa-plan/0.1",
    "plan_id": "plan-e2e",
    "plugin_id": "org.vllm-hust.dla/victim-selector",
    "artifact_digest": "sha256:" + "7" * 64,
    "emit_interval_s": 1,
}


@pytest.fixture
def launches(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:  # SIGTERM first: ecpa run then stops and reaps its whole tree
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()


def launch(
    tmp: Path,
    procs: list[subprocess.Popen[str]],
    *drive_args: str,
    until: tuple[str, ...] = ("--seconds", "60"),
    stdout: int = subprocess.DEVNULL,
    plan_changes: dict[str, Any] | None = None,
) -> tuple[subprocess.Popen[str], Path]:
    """``ecpa run`` of the driver; returns the process and its launch directory."""
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({**PLAN, **(plan_changes or {})}))
    env = {k: v for k, v in os.environ.items() if k not in BINDING_NAMES}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "dla_plugin.drive", *until, "--step-ms", "1"]
    proc = subprocess.Popen(
        [
            str(ECPA),
            "run",
            "--plan",
            str(plan),
            "--evidence-dir",
            str(tmp / "runs"),
            "--grace",
            "5",
            "--",
            *command,
            *drive_args,
        ],
        env=env,
        cwd=tmp,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    match = re.match(r"ecpa run: launch (\S+) in (.+)$", first)
    assert match, first
    directory = Path(match.group(2).strip())
    return proc, directory if directory.is_absolute() else tmp / directory


def status(directory: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = subprocess.run(
        [str(ECPA), "status", "--launch", str(directory), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def wait_status(directory: Path, want: bool, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        code, doc = status(directory)
        if doc["runtime_effective"] is want or time.monotonic() > deadline:
            assert doc["runtime_effective"] is want, doc["reasons"]
            assert code == (0 if want else 1)
            return doc
        time.sleep(0.3)


def test_effective_while_it_runs_and_withdrawn_after_it_exits(
    tmp_path: Path, launches: list[subprocess.Popen[str]]
) -> None:
    proc, directory = launch(tmp_path, launches)
    doc = wait_status(directory, True)
    assert doc["counters"]["selections"] > 0
    assert doc["counters"]["failures"] == 0
    assert doc["counters"]["calls"] >= doc["counters"]["selections"]
    assert doc["refused"] == {}
    proc.send_signal(signal.SIGTERM)  # forwarded: the driver stops cleanly, its observer flushes
    assert proc.wait(timeout=30) == 0
    code, after = status(directory)
    assert code == 1
    assert after["runtime_effective"] is False
    reasons = after["reasons"]
    assert codes(reasons)[0] == "launch_ended", reasons
    assert "the command exited with status 0" in texts(reasons)[0], reasons  # how
    assert texts(reasons)[0].endswith(f"ecpa audit --launch {directory}"), reasons  # then
    # Then what the evidence says: within the second the launch ended its records still
    # verify and the process is gone; after it, the key's window has closed.
    assert codes(reasons)[1] == "coverage_incomplete", reasons
    assert any(
        r.get("slot") == "scheduler.0" and r["code"] in ("not_alive", "no_evidence")
        for r in reasons
    ), reasons


def test_dead_process_with_open_key_window_names_the_process(
    tmp_path: Path, launches: list[subprocess.Popen[str]]
) -> None:
    """SIGKILL the driver itself: status turns false with "process not alive"; the log's
    complete lines all verify; at most the last emit interval is lost."""
    proc, directory = launch(tmp_path, launches)
    doc = wait_status(directory, True)
    pid = int(doc["newest"]["process"]["start_identity"].split(":")[1])
    time.sleep(1.5)  # let it emit at least once more
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    # Judge the log at the time of the kill.
    expected = launch_from_file(directory / "launch.json")
    store = TrustStore.load(directory / "trust.json")
    [log] = (directory / "evidence" / expected.launch_id).glob("*.jsonl")  # the driver's log
    assert log.name.startswith(f"scheduler.0-{pid}-")
    data = log.read_bytes()

    def dead(_: object) -> Liveness:
        return Liveness(False, "process not alive: killed")

    result: RuntimeStatus = derive_launch(
        {log.name: read_log(io.BytesIO(data))}, store, expected, now=int(killed_at), liveness=dead
    )
    assert result.refused == {}  # every complete line verifies
    assert result.torn <= 1
    assert result.newest is not None
    assert result.newest.issued_at >= int(killed_at) - PLAN["emit_interval_s"] - 1
    assert result.gaps == ()
    # And the real status, now: not effective, naming the process.
    code, now_doc = status(directory)
    assert code == 1
    assert codes(now_doc["reasons"])[0] == "launch_ended", now_doc
    assert "was killed by signal 9 (status 137)" in texts(now_doc["reasons"])[0], now_doc
    [slot] = now_doc["slots"]
    assert slot["covered"] is False
    assert {"not_alive", "no_evidence"} & set(codes(slot["reasons"])), slot["reasons"]


@pytest.mark.parametrize(
    "args",
    [("--predictions", "none"), ("--path", "policy", "--bypass"), ("--path", "component")],
)
def test_no_predictions_or_bypass_is_never_effective(
    tmp_path: Path, launches: list[subprocess.Popen[str]], args: tuple[str, ...]
) -> None:
    if args == ("--path", "component"):
        args = (*args, "--predictions", "none")
    proc, directory = launch(tmp_path, launches, *args)
    start = time.monotonic()
    seen_calls = 0
    # Watch for 4 s, and on a loaded machine until the plugin was called (at most 60 s).
    while time.monotonic() < start + 4.0 or (seen_calls == 0 and time.monotonic() < start + 60):
        code, doc = status(directory)
        assert code == 1
        assert doc["runtime_effective"] is False
        if doc["counters"]:
            assert doc["counters"]["selections"] == 0
            seen_calls = max(seen_calls, doc["counters"]["calls"])
        time.sleep(0.5)
    assert seen_calls > 0  # the plugin was called, and abstained every time
    assert "no_selections" in codes(doc["reasons"])
    # The cause, with its counts: called, and abstained every time.
    assert any("no selections: the plugin abstained on all" in r for r in texts(doc["reasons"]))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def test_the_bypass_on_a_victim_selector_path_loads_nothing(
    tmp_path: Path, launches: list[subprocess.Popen[str]]
) -> None:
    """On the legacy and typed-component paths the host itself honours the bypass: its no-op
    selector runs, the plugin is never loaded as the selector nor called, and there is no
    evidence at all."""
    proc, directory = launch(tmp_path, launches, "--bypass")
    start = time.monotonic()
    while time.monotonic() < start + 4.0:
        code, doc = status(directory)
        assert code == 1
        assert doc["runtime_effective"] is False
        assert doc["counters"] is None
        time.sleep(0.5)
    assert "no_evidence" in codes(doc["reasons"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def test_the_legacy_path_under_ecpa_run_signs_what_the_host_counted(
    tmp_path: Path, launches: list[subprocess.Popen[str]]
) -> None:
    """The path the seed README documents (``victim_selector_plugin: "dla"``, the
    ``vllm.victim_selector`` entry point, ``pick_victim`` on ``running``) under a real
    launch: effective while it runs, and the signed counters ``ecpa status`` reads at the end
    equal what the host saw (calls, changed decisions) and the selector exported."""
    proc, directory = launch(
        tmp_path,
        launches,
        "--path",
        "legacy",
        until=("--steps", "6000"),
        stdout=subprocess.PIPE,
    )
    effective_seen = False
    while proc.poll() is None:
        code, doc = status(directory)
        effective_seen |= doc["runtime_effective"] is True
        time.sleep(0.3)
    assert proc.wait(timeout=30) == 0
    assert effective_seen
    assert proc.stdout is not None
    summary = json.loads(proc.stdout.read().splitlines()[-1])
    proc.stdout.close()
    assert summary["path"] == "legacy"
    host = summary["host"]
    assert host["selector"] == "DlaVictimSelector"
    # The final record (written at the driver's exit) is judged as of its own time.
    expected = launch_from_file(directory / "launch.json")
    [log] = (directory / "evidence" / expected.launch_id).glob("*.jsonl")
    final = json.loads(log.read_bytes().splitlines()[-1])
    issued = json.loads(base64.urlsafe_b64decode(final["payload_b64"] + "==="))["issued_at"]
    code, doc = status(directory, "--now", str(issued))
    assert code == 1  # the launch has ended: its process is gone
    [slot] = doc["slots"]
    counters = slot["counters"]
    assert counters["schema"] == "ecpa-dispatch-counters/0.4"
    assert counters["calls"] == host["calls"] == host["metrics"]["calls"] > 0, (
        doc["reasons"],
        doc["refused"],
        slot,
    )
    assert counters["changed"] == host["changed"] == host["metrics"]["changed"] > 0
    for name in ("selections", "abstentions", "failures"):
        assert counters[name] == host["metrics"][name], name
    assert counters["failures"] == 0
    assert counters["selections"] > counters["changed"]  # some choices were the builtin's own


def test_a_predictor_gone_away_withdraws_the_verdict(
    tmp_path: Path, launches: list[subprocess.Popen[str]]
) -> None:
    """RUNTIME.md "Counters 0.3": the predictor goes away, the plugin keeps being
    called and only abstains; cumulative counters and a last_dispatch_at moved by abstentions
    do not keep the status true. With max_abstain_s 3 it turns false, saying why."""
    proc, directory = launch(
        tmp_path,
        launches,
        "--predictor-stops-after",
        "2",
        plan_changes={"schema": "ecpa-plan/0.2", "max_abstain_s": 3},
    )
    wait_status(directory, True, timeout=30)
    doc = wait_status(directory, False, timeout=60)
    reasons = doc["slots"][0]["reasons"]
    assert "abstaining" in codes(reasons), reasons
    assert doc["slots"][0]["counters"]["selections"] > 0  # it had selected, and stopped
    # A longer allowance, given to status, tells the same evidence differently.
    _, relaxed = status(directory, "--max-abstain", "100000")
    assert "abstaining" not in codes(relaxed["slots"][0]["reasons"]), relaxed["reasons"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
