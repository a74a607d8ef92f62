"""The command line: exit codes and the demo's end-to-end run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ecpa.cli import main


def test_demo_runs_the_whole_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "9 of 9 steps behaved as the profile says" in out
    for code in (
        "REPLAYED_NONCE",
        "ATTESTATION_INVALID_SIGNATURE",
        "ATTESTATION_EXPIRED",
        "ATTESTATION_TRUST_POLICY",
    ):
        assert code in out
    assert "!! expected" not in out


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "ecpa-jcs-jws-eddsa/0.1" in capsys.readouterr().out


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ecpa", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ecpa ")
