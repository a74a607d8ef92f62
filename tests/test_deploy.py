"""docs/deploy: the Kubernetes manifests are valid resources of the Kubernetes API (strict:
no unknown member), the systemd units pass ``systemd-analyze verify`` where it runs, and
every ``ecpa`` option they use exists; the stop timeouts leave ``ecpa run`` its grace."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

DEPLOY = ROOT / "docs" / "deploy"
ECPA = Path(sys.executable).parent / "ecpa"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
UNITS = sorted(DEPLOY.glob("*.service"))


def test_there_is_something_to_check() -> None:
    assert [p.name for p in MANIFESTS] == ["scheduler-pod.yaml", "serve.yaml"]
    assert [p.name for p in UNITS] == ["ecpa-run@.service", "ecpa-serve.service"]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_manifests_are_valid_kubernetes_resources(manifest: Path) -> None:
    import kubernetes_validate
    import yaml

    docs = [doc for doc in yaml.safe_load_all(manifest.read_text()) if doc]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def _ecpa_commands() -> list[list[str]]:
    """Each ``ecpa ...`` command line of the units and manifests, as words."""
    found = []
    for unit in UNITS:
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart="):
                found.append(shlex.split(line.removeprefix("ExecStart="))[1:])
    for manifest in MANIFESTS:
        text = manifest.read_text()
        for match in re.finditer(r"exec ecpa ((?:[^\n]|\n {10,})+)", text):
            words = shlex.split(match.group(1).replace("\n", " "))
            found.append(words)
        if "- serve\n" in text:
            found.append(["serve", "--listen", "0.0.0.0:9464", "--token-file", "F"])
    return found


def test_every_ecpa_option_they_use_exists() -> None:
    commands = _ecpa_commands()
    assert len(commands) >= 4, commands
    for words in commands:
        command = words[0]
        options = [w for w in words if w.startswith("--") and w != "--"]
        if "--" in words:
            options = [w for w in words[: words.index("--")] if w.startswith("--")]
        help_text = subprocess.run(
            [str(ECPA), command, "--help"], capture_output=True, text=True, check=True
        ).stdout
        for option in options:
            assert option in help_text, (command, option)


def test_the_run_unit_gives_ecpa_run_its_grace() -> None:
    text = (DEPLOY / "ecpa-run@.service").read_text()
    grace = float(re.search(r"--grace (\d+)", text).group(1))  # type: ignore[union-attr]
    stop = float(re.search(r"^TimeoutStopSec=(\d+)$", text, re.M).group(1))  # type: ignore[union-attr]
    assert "KillMode=mixed" in text  # SIGTERM to ecpa run alone; it stops the tree itself
    assert stop > grace
    assert "--launch-id %i" in text


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_units_pass_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze here")
    name = unit.name.replace("@.", "@launch-0123456789abcdef.")
    copy = tmp_path / name
    copy.write_text(unit.read_text().replace("/opt/ecpa/bin/ecpa", str(ECPA)))
    out = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, check=False, timeout=60
    )
    if "Failed to" in out.stderr and "bus" in out.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    assert "ecpa" not in out.stderr, out.stderr  # no complaint about our lines
