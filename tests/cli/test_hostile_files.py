"""Every file the tools read as evidence, trust, launch or key: no symlink followed, never
blocking, regular files only, read with a bound (PROFILE.md, strict JSON; docs/cli.md). The
commands run as real processes with a timeout, so a hang fails the test instead of stalling the
suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ecpa
from ecpa.observer import SELECTION, Observer
from ecpa.runtime.model.process import LaunchEnvironment
from tests._launch_helpers import Launches, clean_env, ecpa_cmd, launches, wait_until
from tests.support import KEY_1, trust_doc

__all__ = ["launches"]  # the fixture, used by name


@pytest.fixture
def trust(tmp_path: Path) -> Path:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps(trust_doc()))
    return path


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "evidence.fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def zeros(tmp_path: Path) -> Path:
    path = tmp_path / "zeros.jsonl"
    path.symlink_to("/dev/zero")
    return path


def test_verify_on_a_fifo_fails_at_once(fifo: Path, trust: Path) -> None:
    """`ecpa verify` on a FIFO fails at once instead of hanging."""
    started = time.monotonic()
    out = ecpa_cmd("verify", fifo, "--trust", trust)
    assert out.returncode == 2, out.stderr
    assert "ECPA_INVALID_INPUT" in out.stderr
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("form", ["log", "bundle"])
def test_verify_on_a_symlink_to_dev_zero_fails_at_once(zeros: Path, trust: Path, form: str) -> None:
    """`ecpa verify` on a symlink to /dev/zero fails at once instead of looping."""
    target = zeros if form == "log" else zeros.with_suffix(".jws")
    if form == "bundle":
        target.symlink_to("/dev/zero")
    out = ecpa_cmd("verify", target, "--trust", trust)
    assert out.returncode == 2, out.stderr
    assert "symlink" in out.stderr


def test_verify_refuses_a_trust_store_that_is_a_fifo(tmp_path: Path, fifo: Path) -> None:
    (tmp_path / "x.jws").write_text("x..y\n")
    out = ecpa_cmd("verify", tmp_path / "x.jws", "--trust", fifo)
    assert out.returncode == 2, out.stderr


def test_status_evidence_on_a_fifo_and_a_symlink_fails_at_once(
    tmp_path: Path, fifo: Path, zeros: Path, trust: Path
) -> None:
    """`ecpa status` neither hangs on a FIFO nor follows symlinks the writer refuses."""
    binding = tmp_path / "binding.json"
    binding.write_text(
        json.dumps(
            {
                "plan_id": "p",
                "launch_id": "l",
                "plugin_id": "x",
                "artifact_digest": "sha256:" + "0" * 64,
                "process_epoch": 1,
                "challenge": "c",
            }
        )
    )
    real = tmp_path / "real.jsonl"
    real.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    for log in (fifo, zeros, link):
        out = ecpa_cmd("status", "--evidence", log, "--trust", trust, "--binding", binding)
        assert out.returncode == 2, (log, out.stdout, out.stderr)


def test_status_of_a_launch_with_a_fifo_or_symlink_inside(
    tmp_path: Path, launches: Launches
) -> None:
    """A FIFO or a symlink among a launch's process logs is skipped with a reason; a
    symlinked trust.json or launch.json is refused (exit 2); nothing hangs."""
    _, directory = launches.start(sys.executable, "-c", "import time; time.sleep(60)")
    logs = directory / "evidence" / directory.name
    os.mkfifo(logs / "scheduler.0-4242-1000.jsonl")
    (logs / "scheduler.0-4243-1000.jsonl").symlink_to("/dev/zero")
    out = ecpa_cmd("status", "--launch", directory)
    assert out.returncode == 1, out.stderr
    assert "'scheduler.0-4242-1000.jsonl': a FIFO, not a log, skipped" in out.stdout
    assert "'scheduler.0-4243-1000.jsonl': not readable as a log" in out.stdout
    for name in ("trust.json", "launch.json"):
        original = directory / name
        kept = directory / f"{name}.real"
        original.rename(kept)
        original.symlink_to(kept)
        out = ecpa_cmd("status", "--launch", directory)
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert "symlink" in out.stderr
        original.unlink()
        kept.rename(original)


def test_the_observer_never_writes_through_a_symlinked_evidence_dir(tmp_path: Path) -> None:
    """The observer never writes through a symlinked `evidence/` directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    evidence = tmp_path / "evidence"
    evidence.symlink_to(elsewhere)
    key = tmp_path / "key.pem"
    key.write_bytes(KEY_1.to_pem())
    launch = LaunchEnvironment(
        plan_id="p",
        launch_id="launch-1",
        challenge="c" * 32,
        plugin_id="x",
        artifact_digest="sha256:" + "0" * 64,
        issuer="urn:i",
        kid="k",
        signing_key_file=key,
        evidence_dir=evidence,
        process_epoch=1,
    )
    obs = Observer(launch, KEY_1, start=False)
    obs.count(SELECTION)
    assert not obs.flush()  # refused: the directory is a symlink
    obs.close(timeout=0.5)
    assert list(elsewhere.iterdir()) == []
    assert obs.snapshot()["dropped"] >= 1


def test_sign_with_dev_zero_as_the_key(tmp_path: Path) -> None:
    """`ecpa sign --key /dev/zero` is a usage error (exit 2), never a MemoryError (exit 3)."""
    statement = tmp_path / "st.json"
    statement.write_text("{}")
    out = ecpa_cmd("sign", statement, "--key", "/dev/zero")
    assert out.returncode == 2, out.stderr
    assert "ECPA_INVALID_KEY" in out.stderr
    assert "a character device" in out.stderr


def test_a_nul_in_the_launch_id_is_a_usage_error(tmp_path: Path, launches: Launches) -> None:
    """A NUL in launch.json's launch_id is a usage error, never a ValueError (exit 3)."""
    proc, directory = launches.start("true")
    assert proc.wait(timeout=30) == 0
    doc = json.loads((directory / "launch.json").read_text())
    doc["launch_id"] = "launch\u0000x"
    (directory / "launch.json").write_text(json.dumps(doc))
    out = ecpa_cmd("status", "--launch", directory)
    assert out.returncode == 2, out.stderr
    assert "expected a launch_id usable as a file name" in out.stderr


@pytest.mark.parametrize("remove", ["logs", "evidence"])
def test_an_ended_launch_whose_logs_are_gone_is_false_not_an_error(
    tmp_path: Path, launches: Launches, remove: str
) -> None:
    """An ended launch whose log was removed is false, not an error (exit 2)."""
    proc, directory = launches.start("true")
    assert proc.wait(timeout=30) == 0
    target = directory / "evidence"
    if remove == "logs":
        target = target / directory.name
    for path in sorted(target.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    target.rmdir()
    out = ecpa_cmd("status", "--launch", directory)
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines()[2].startswith("reason: launch ended at ")


def test_a_01_launch_whose_log_is_gone_is_false_not_an_error(tmp_path: Path) -> None:
    launch = tmp_path / "launch"
    (launch / "evidence").mkdir(parents=True)
    doc = {
        "schema": "ecpa-launch/0.1",
        "plan_id": "p",
        "launch_id": "launch-1",
        "plugin_id": "x",
        "artifact_digest": "sha256:" + "0" * 64,
        "process_epoch": 1,
        "challenge": "c" * 32,
    }
    (launch / "launch.json").write_text(json.dumps(doc))
    (launch / "trust.json").write_text(json.dumps(trust_doc()))
    exit_doc = {
        "schema": "ecpa-launch-exit/0.1",
        "ended_at": 1,
        "exit_status": 0,
        "signal": None,
        "error": None,
    }
    (launch / "exit.json").write_text(json.dumps(exit_doc))
    out = ecpa_cmd("status", "--launch", launch)
    assert out.returncode == 1, out.stderr
    assert "launch ended at 1" in out.stdout


def test_the_key_path_of_a_01_binding_as_a_fifo_never_blocks(tmp_path: Path) -> None:
    """A key path that is a FIFO never blocks the scheduler's first select_victim."""
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    (tmp_path / "evidence").mkdir(mode=0o700)
    env = {
        **clean_env(),
        "ECPA_PLAN_ID": "p",
        "ECPA_LAUNCH_ID": "launch-1",
        "ECPA_CHALLENGE": "c" * 32,
        "ECPA_PLUGIN_ID": "x",
        "ECPA_ARTIFACT_DIGEST": "sha256:" + "0" * 64,
        "ECPA_ISSUER": "urn:i",
        "ECPA_KID": "k",
        "ECPA_SIGNING_KEY_FILE": str(fifo),
        "ECPA_EVIDENCE_DIR": str(tmp_path / "evidence"),
        "ECPA_PROCESS_EPOCH": "1",
    }
    code = (
        "import time, sys\n"
        "from dla_plugin import DlaVictimSelector\n"
        "t = time.monotonic()\n"
        "DlaVictimSelector().select_victim(None)\n"
        "sys.exit(0 if time.monotonic() - t < 5 else 1)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert "ecpa observer inactive" in out.stderr
    assert "a FIFO" in out.stderr


def test_wait_until_is_not_vacuous() -> None:
    # The helper the tests above lean on must report a timeout as False.
    assert wait_until(lambda: False, timeout=0.05) is False
    assert ecpa.ErrorCode.INVALID_INPUT.value == "ECPA_INVALID_INPUT"


def test_an_exit_json_that_is_a_dangling_symlink_still_ends_the_launch(tmp_path: Path) -> None:
    """A dangling exit.json symlink still says the launch ended (`exists()`, which follows
    the link, would read it as 'not ended')."""
    from ecpa.runtime.model.launch import launch_ended

    link = tmp_path / "exit.json"
    link.symlink_to(tmp_path / "nowhere")
    reason = launch_ended(link)
    assert reason is not None
    assert reason.startswith("launch ended (exit.json unreadable")
