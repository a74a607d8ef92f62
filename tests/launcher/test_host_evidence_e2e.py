"""The host's witness under ``ecpa run`` with real processes (docs/host-evidence.md): ecpa run
names its sink to the host; the project's model of the vLLM-HUST host delivers each
scheduler process's resolution and dispatches to it; ``ecpa status`` shows, per slot, what
the host witnessed, equal to the host controller's own stats once the emit interval has
passed; a rank the host bound fills its slot; plugin reports alone never give true under
``host_evidence: "required"``; ``ecpa audit`` finds a journal line removed or changed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests._launch_helpers import (
    ECPA,
    PLAN,
    Launches,
    clean_env,
    ecpa_cmd,
    launches,
    status,
    wait_status,
    wait_until,
)

pytestmark = pytest.mark.e2e
__all__ = ["launches"]  # the fixture, used by name

POLICY = "dla_plugin.selector.DlaVictimSelector"
REQUIRED = {
    **PLAN,
    "schema": "ecpa-plan/0.3",
    "host_evidence": "required",
    "host_policy": POLICY,
}
DRIVE = [sys.executable, "-m", "dla_plugin.drive", "--path", "policy", "--blocks", "256"]
DRIVE += ["--rate", "5", "--predictions", "lognormal-1.0", "--step-ms", "0.05"]


def summaries(path: Path, count: int) -> list[dict[str, Any]]:
    """The drivers' summary lines (one per rank) once all are there."""

    def ready() -> bool:
        return path.exists() and len(path.read_text().splitlines()) >= count

    assert wait_until(ready, timeout=60), path.read_text() if path.exists() else "no output"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_ecpa_run_names_its_sink_to_the_host_and_refuses_a_callers(tmp_path: Path) -> None:
    show = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('VLLM_ECPA_')}))"  # noqa: E501
    runs = tmp_path / "runs"
    out = ecpa_cmd("run", "--evidence-dir", runs, "--", sys.executable, "-c", show)
    assert out.returncode == 0, out.stderr
    env = json.loads(out.stdout)
    launch_id = next(runs.iterdir()).name
    assert env["VLLM_ECPA_EVIDENCE_SINK"] == "ecpa.observer.host_sink:deliver"
    assert env["VLLM_ECPA_EVIDENCE_STRICT"] == "1"
    assert env["VLLM_ECPA_LAUNCH_ID"] == launch_id
    doc = json.loads((runs / launch_id / "launch.json").read_text())
    assert env["VLLM_ECPA_PLAN_ID"] == doc["plan_id"]
    refused = subprocess.run(
        [str(ECPA), "run", "--evidence-dir", str(runs), "--", "true"],
        env={**clean_env(), "VLLM_ECPA_EVIDENCE_SINK": "evil:sink"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "VLLM_ECPA_EVIDENCE_SINK" in refused.stderr
    assert len(list(runs.iterdir())) == 1  # nothing started


def test_two_ranks_the_host_bound_are_covered_on_its_witness(
    launches: Launches, tmp_path: Path
) -> None:
    plan = {**REQUIRED, "slots": [{"role": "scheduler", "ordinal": i} for i in (0, 1)]}
    out = tmp_path / "ranks.out"
    command = [*DRIVE, "--processes", "2", "--steps", "20000", "--linger", "60"]
    proc, directory = launches.start(*command, plan=plan, stdout=out)
    ranks = {s["dp_rank"]: s for s in summaries(out, 2)}
    launches.pids.update(s["pid"] for s in ranks.values())
    time.sleep(2.5)  # the emit interval (1 s) and the journal's drain have passed
    doc = wait_status(directory, True)
    for slot in doc["slots"]:
        rank = ranks[int(slot["slot"].split(".")[1])]
        stats = rank["host"]
        assert slot["process"]["pid"] == rank["pid"]
        assert slot["source"] == "host"
        assert slot["host"]["resolved"] is True
        assert slot["host"]["policy"] == stats["policy_name"] == POLICY
        assert slot["host"]["dispatches"] == {
            "selected": stats["selections"],
            "abstained": stats["abstentions"],
            "invalid": stats["invalid_selections"],
            "exception": stats["failures"] - stats["invalid_selections"],
        }
        assert stats["selections"] > 0
        assert slot["host"]["newest_event_digest"].startswith("sha256:")
        codes = {r["code"] for r in slot["reasons"]}
        assert "host_selections" in codes
    assert proc.poll() is None


def test_the_host_rank_alone_fills_its_slot(launches: Launches, tmp_path: Path) -> None:
    """No ECPA_PROCESS_ORDINAL: the slot comes from the rank the host bound (scheduler.1)."""
    plan = {**REQUIRED, "slots": [{"role": "scheduler", "ordinal": 1}]}
    out = tmp_path / "rank.out"
    command = [*DRIVE, "--dp-rank", "1", "--steps", "20000", "--linger", "60"]
    _, directory = launches.start(*command, plan=plan, stdout=out)
    [summary] = summaries(out, 1)
    launches.pids.add(summary["pid"])
    doc = wait_status(directory, True)
    assert doc["slots"][0]["slot"] == "scheduler.1"
    assert doc["slots"][0]["kid"].startswith("scheduler.1-")


def test_plugin_reports_alone_are_never_effective_when_the_host_is_required(
    launches: Launches, tmp_path: Path
) -> None:
    """The legacy path: the plugin counts its selections, the host delivers nothing."""
    command = [sys.executable, "-m", "dla_plugin.drive", "--path", "legacy", "--seconds", "60"]
    command += ["--step-ms", "1"]
    _, directory = launches.start(*command, plan=REQUIRED)

    def plugin_selected() -> bool:
        _, doc = status(directory)
        counters = doc["slots"][0]["counters"]
        return bool(counters and counters["selections"] > 0)

    assert wait_until(plugin_selected, timeout=40)
    code, doc = status(directory)
    assert code == 1
    assert doc["runtime_effective"] is False
    assert "host_evidence_missing" in {r["code"] for r in doc["slots"][0]["reasons"]}
    assert doc["slots"][0]["host"]["resolved"] is False


def test_the_audit_finds_a_journal_line_removed_or_changed(
    launches: Launches, tmp_path: Path
) -> None:
    out = tmp_path / "one.out"
    proc, directory = launches.start(*DRIVE, "--steps", "20000", plan=REQUIRED, stdout=out)
    [summary] = summaries(out, 1)
    launches.pids.add(summary["pid"])
    assert proc.wait(timeout=60) == 0
    audit = ecpa_cmd("audit", "--launch", directory, "--json")
    assert audit.returncode == 0, audit.stderr
    report = json.loads(audit.stdout)
    assert report["source"] == "host"
    assert report["host_journals"]["mismatches"] == []
    [journal] = report["host_journals"]["journals"]
    assert journal["lines"] == journal["accounted"] == summary["host"]["calls"] + 1
    [path] = (directory / "evidence" / directory.name / "host").glob("scheduler.*.jsonl")
    original = path.read_bytes()
    lines = original.splitlines(keepends=True)
    assert b"scheduler:selected" in lines[1]
    altered = lines[1].replace(b"scheduler:selected", b"scheduler:abstained")
    for tampered in (
        b"".join(lines[:1] + lines[2:]),  # removed
        b"".join([lines[0], altered, *lines[2:]]),
        b"".join([lines[0], lines[2], lines[1], *lines[3:]]),  # reordered
        original + lines[-1],  # appended after the final record
    ):
        path.write_bytes(tampered)
        found = ecpa_cmd("audit", "--launch", directory, "--json")
        assert found.returncode == 1, found.stderr
        codes = {m["code"] for m in json.loads(found.stdout)["host_journals"]["mismatches"]}
        assert codes == {"host_journal_mismatch"}
    path.write_bytes(original)
    assert ecpa_cmd("audit", "--launch", directory).returncode == 0
