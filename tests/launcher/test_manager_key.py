"""The manager key of `ecpa run` (docs/keys.md): each process key it enrolls certified in
enrollments.jsonl before trust.json lists it, closed at the end; the key made on first use
and trusted by the operator's default store; never handed to the command."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import ecpa
from ecpa.profile.trust import TrustStore
from ecpa.runtime import ENROLLMENTS_FILE, default_trust_store, manager_kid
from ecpa.runtime.model.certificates import read_certificates
from ecpa.runtime.model.launch import launch_from_file
from tests._launch_helpers import (
    DRIVE,
    ECPA,
    PLAN,
    Launches,
    clean_env,
    launches,
    wait_status,
    wait_until,
)
from tests.support import write_secret

pytestmark = pytest.mark.e2e  # real processes throughout

__all__ = ["launches"]  # the fixture, used by name


def _run(tmp_path: Path, *command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    args = [str(ECPA), "run", "--plan", str(plan), "--evidence-dir", str(tmp_path / "runs")]
    return subprocess.run(
        [*args, "--", *command], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_each_process_key_is_certified_then_closed_at_the_end(launches: Launches) -> None:
    plan = {**PLAN, "slots": [{"role": "scheduler", "ordinal": i} for i in range(2)]}
    run, directory = launches.start(*DRIVE, "--processes", "2", plan=plan)
    wait_status(directory, True, timeout=60)
    certificates = directory / ENROLLMENTS_FILE
    assert stat.S_IMODE(certificates.stat().st_mode) == 0o600
    expected = launch_from_file(directory / "launch.json")
    operator = TrustStore.load(default_trust_store())
    launch_doc = (directory / "launch.json").read_bytes()
    running = read_certificates(certificates.read_bytes(), operator, expected, launch_doc)
    assert running.sealed
    assert running.refused == []
    trust = json.loads((directory / "trust.json").read_text())
    assert set(running.keys) == {entry["kid"] for entry in trust["keys"]}
    assert len(running.keys) == 2
    for entry in trust["keys"]:  # trust.json lists exactly what was certified
        assert running.keys[entry["kid"]].public_key_b64 == entry["public_key_b64"]
    launches.logs(directory)  # their pids, for the cleanup
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=60)
    ended_at = json.loads((directory / "exit.json").read_text())["ended_at"]
    lines = certificates.read_bytes().splitlines()
    assert len(lines) == 5  # the launch sealed, two keys enrolled, two closed
    ended = read_certificates(certificates.read_bytes(), operator, expected, launch_doc)
    assert ended.refused == []
    assert {cert.not_after for cert in ended.keys.values()} == {ended_at}
    assert {cert.seq for cert in ended.keys.values()} == {4, 5}


def test_first_use_makes_the_manager_key_and_trusts_it(tmp_path: Path) -> None:
    config = tmp_path / "config"
    env = {**clean_env(), "XDG_CONFIG_HOME": str(config)}
    first = _run(tmp_path, "true", env=env)
    assert first.returncode == 0, first.stderr
    key_file = config / "ecpa" / "manager-key.pem"
    assert f"made the manager key {key_file}" in first.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    public = ecpa.SigningKey.load(key_file).public_key
    store = TrustStore.load(config / "ecpa" / "trust.json")
    found = store.lookup("urn:ecpa:manager", manager_kid(public))
    assert found is not None
    assert found.key == public
    assert found.entry.subjects == ["process-key"]
    again = _run(tmp_path, "true", env=env)
    assert again.returncode == 0, again.stderr
    assert "made the manager key" not in again.stderr
    assert "does not trust" not in again.stderr
    assert key_file.read_bytes() == ecpa.SigningKey.load(key_file).to_pem()  # the same key


def test_a_manager_key_the_operator_does_not_list_is_said_with_the_command_to_add_it(
    tmp_path: Path,
) -> None:
    other = write_secret(tmp_path / "other.pem", ecpa.SigningKey.generate().to_pem().decode())
    env = {**clean_env(), "ECPA_MANAGER_KEY": str(other)}
    out = _run(tmp_path, "true", env=env)
    assert out.returncode == 0, out.stderr
    assert "does not trust the manager key" in out.stderr
    assert f"ecpa trust add {default_trust_store()} --issuer urn:ecpa:manager" in out.stderr


def test_a_manager_key_file_others_may_read_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    loose = tmp_path / "loose.pem"
    loose.write_bytes(ecpa.SigningKey.generate().to_pem())
    os.chmod(loose, 0o644)
    marker = tmp_path / "ran"
    env = {**clean_env(), "ECPA_MANAGER_KEY": str(loose)}
    out = _run(tmp_path, "touch", str(marker), env=env)
    assert out.returncode == 2, out.stderr
    assert "ECPA_INVALID_KEY" in out.stderr
    assert str(loose) in out.stderr
    assert not marker.exists()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_command_never_gets_the_manager_key_nor_a_pin(tmp_path: Path) -> None:
    env = {
        **clean_env(),
        "ECPA_MANAGER_KEY": str(
            write_secret(tmp_path / "m.pem", ecpa.SigningKey.generate().to_pem().decode())
        ),
        "ECPA_PKCS11_PIN": "1234",
        "ECPA_KEY_PASSWORD": "secret",
    }
    out = _run(tmp_path, "env", env=env)
    assert out.returncode == 0, out.stderr
    names = {line.split("=", 1)[0] for line in out.stdout.splitlines()}
    assert "ECPA_LAUNCH_ID" in names  # the command ran, with its binding
    assert names.isdisjoint({"ECPA_MANAGER_KEY", "ECPA_PKCS11_PIN", "ECPA_KEY_PASSWORD"})


def test_the_launch_is_effective_only_while_the_operator_trusts_its_manager(
    launches: Launches, tmp_path: Path
) -> None:
    run, directory = launches.start(*DRIVE)
    wait_status(directory, True, timeout=60)
    launches.logs(directory)
    elsewhere = tmp_path / "operator.json"
    elsewhere.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": []}))
    out = subprocess.run(
        [str(ECPA), "status", "--launch", str(directory), "--json", "--trust", str(elsewhere)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["reasons"][0]["code"] == "enrollment_refused"
    assert "ATTESTATION_UNKNOWN_KEY" in doc["reasons"][0]["text"]
    run.send_signal(signal.SIGTERM)
    assert wait_until(lambda: run.poll() is not None, timeout=60)


#: Runs `ecpa run` as the installed script does (standalone), then says whether this
#: process may still be dumped (PR_GET_DUMPABLE, 3): 0 is what a PIN in its environment
#: needs (a same-user process can no longer read /proc/<pid>/environ or its memory).
_STANDALONE = (
    "import ctypes, sys\n"
    "from ecpa.cli import main\n"
    "code = main(sys.argv[1:], standalone=True)\n"
    "print('dumpable', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), 'exit', code)\n"
)


def test_ecpa_run_alone_cannot_be_read_by_its_command(tmp_path: Path) -> None:
    """Checked on the flag, not by a read: this suite runs as root, whose reads of
    /proc/<pid>/environ no flag stops (docs/keys.md, "The same user")."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    env = {
        **clean_env(),
        "ECPA_PKCS11_PIN": "1234",
        "ECPA_MANAGER_KEY": str(
            write_secret(tmp_path / "m.pem", ecpa.SigningKey.generate().to_pem().decode())
        ),
    }
    args = ["run", "--plan", str(plan), "--evidence-dir", str(tmp_path / "runs"), "--", "true"]
    for standalone, expected in ((True, "dumpable 0 exit 0"), (False, "dumpable 1 exit 0")):
        code = _STANDALONE if standalone else _STANDALONE.replace("True", "False")
        out = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.stdout.strip().splitlines()[-1] == expected, out.stderr
