"""``ecpa status --json``'s ``lifecycle`` for a real launch of the installed bundle (``ecpa
run`` without ``--plan``) and for a log judged with ``--binding``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._launch_helpers import ecpa_cmd
from tests.support import trust_doc, trust_entry

pytestmark = pytest.mark.e2e  # runs the ecpa script and ecpa run


def test_a_launch_of_the_installed_bundle_has_its_lifecycle(tmp_path: Path) -> None:
    run = ecpa_cmd("run", "--evidence-dir", tmp_path / "runs", "--", "true")
    assert run.returncode == 0, run.stderr
    match = re.search(r"ecpa run: launch \S+ in (.+)$", run.stderr, re.MULTILINE)
    assert match, run.stderr
    out = ecpa_cmd("status", "--launch", match.group(1).strip(), "--json")
    assert out.returncode == 1, out.stdout + out.stderr  # ended: false
    stages = json.loads(out.stdout)["lifecycle"]
    assert list(stages) == ["installed", "configured", "enabled", "runtime_effective"]
    assert stages["installed"]["state"] is True, stages["installed"]
    assert stages["configured"]["state"] is True
    assert stages["enabled"]["state"] is True
    assert stages["runtime_effective"]["state"] is False
    assert "launch ended" in stages["runtime_effective"]["detail"]
    text = ecpa_cmd("status", "--launch", match.group(1).strip())
    assert "lifecycle" not in text.stdout  # the text output is unchanged


def test_a_binding_of_another_plugin_is_not_installed(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "trust.json").write_text(json.dumps(trust_doc(trust_entry())))
    doc = {
        "plan_id": "plan-7",
        "launch_id": "launch-42",
        "plugin_id": "plugin:dla",
        "artifact_digest": "sha256:" + "1" * 64,
        "process_epoch": 3,
        "challenge": "c0ffee",
    }
    (tmp_path / "binding.json").write_text(json.dumps(doc))
    args = ["--trust", tmp_path / "trust.json", "--binding", tmp_path / "binding.json"]
    out = ecpa_cmd("status", "--evidence", tmp_path / "empty.jsonl", *args, "--json")
    assert out.returncode == 1, out.stdout + out.stderr
    stages = json.loads(out.stdout)["lifecycle"]
    assert stages["installed"]["state"] is False
    assert "'plugin:dla' is not the" in stages["installed"]["detail"]
    assert stages["enabled"]["state"] is True
