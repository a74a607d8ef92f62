"""``ecpa run``: the manager's launch (RUNTIME.md "Actors", "Launch binding", "Launch
directory"), with real child processes.

Most runs call ``ecpa.cli.main`` in this process (the child is still a real process);
signals are sent to a real ``ecpa`` process, whose handlers then forward them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.launcher.run import (
    BINDING_NAMES,
    FORWARDED,
    Launch,
    LaunchExit,
    finish_launch,
    prepare_launch,
    run_launch,
)
from ecpa.profile.b64 import b64u_decode
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TrustStore
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.model.launch import Slot, launch_from_file
from ecpa.runtime.model.plan import plan_from_dict
from ecpa.runtime.model.process import ENV_NAMES_02, launch_from_env, read_identity
from tests._cli_helpers import Run, ecpa_main
from tests.support import ROOT

pytestmark = pytest.mark.e2e  # real processes throughout

ECPA = Path(sys.executable).parent / "ecpa"
DIGEST = "sha256:" + "11" * 32
PLAN: dict[str, Any] = {
    "schema": "ecpa-plan/0.1",
    "plan_id": "plan-7",
    "plugin_id": "plugin:dla",
    "artifact_digest": DIGEST,
    "issuer": "urn:ecpa:issuer:test",
    "emit_interval_s": 2,
}
#: Dumps the child's ECPA_* environment to argv[1] (and its cwd), then exits with argv[2].
DUMP = (
    "import json, os, sys\n"
    "env = {k: v for k, v in os.environ.items() if k.startswith('ECPA_')}\n"
    "open(sys.argv[1], 'w').write(json.dumps(env))\n"
    "sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)\n"
)


@pytest.fixture(autouse=True)
def _no_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BINDING_NAMES:
        monkeypatch.delenv(name, raising=False)


def write_plan(directory: Path, **changes: Any) -> Path:
    path = directory / "plan.json"
    path.write_text(json.dumps({**PLAN, **changes}))
    return path


def run(tmp: Path, *command: str, plan: Path | None = None, extra: tuple[str, ...] = ()) -> Run:
    """``ecpa run --plan PLAN --evidence-dir TMP/runs [EXTRA] -- COMMAND`` in-process."""
    plan = plan if plan is not None else write_plan(tmp)
    return ecpa_main("run", "--plan", plan, "--evidence-dir", tmp / "runs", *extra, "--", *command)


def launch_dirs(tmp: Path) -> list[Path]:
    runs = tmp / "runs"
    return sorted(runs.iterdir()) if runs.is_dir() else []


def only_launch(tmp: Path) -> Path:
    [directory] = launch_dirs(tmp)
    return directory


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_launch_directory_env_and_files(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    before = int(time.time())
    result = run(tmp_path, sys.executable, "-c", DUMP, str(dump))
    after = int(time.time())
    assert result.status == 0, result.err
    directory = only_launch(tmp_path)
    launch_id = directory.name
    assert launch_id.startswith("launch-")
    assert len(launch_id) == len("launch-") + 16
    assert result.err.splitlines() == [
        f"ecpa run: launch {launch_id} in {directory}",
        f"ecpa run: {sys.executable} exited with status 0; ecpa status --launch {directory}",
    ]
    # Layout and modes (RUNTIME.md "Launch directory", "Process keys": no key on disk).
    assert sorted(p.name for p in directory.iterdir()) == [
        "enrollments.jsonl",  # the manager's seal on launch.json, written before the command
        "evidence",
        "exit.json",
        "launch.json",
        "trust.json",
    ]
    assert mode(tmp_path / "runs") == 0o700
    assert mode(directory) == 0o700
    assert mode(directory / "evidence") == 0o700
    assert mode(directory / "evidence" / launch_id) == 0o700  # one log per process, later
    assert list((directory / "evidence" / launch_id).iterdir()) == []
    assert not list(directory.rglob("*.pem"))
    # The child's environment is the 0.2 binding, which launch.json matches.
    env = read_json(dump)
    assert sorted(env) == sorted([*ENV_NAMES_02, "ECPA_EMIT_INTERVAL_S"])
    binding = launch_from_env(env)
    assert binding is not None
    assert binding.version == "0.2"
    expected = launch_from_file(directory / "launch.json")
    assert (expected.plan_id, expected.launch_id, expected.challenge) == (
        binding.plan_id,
        binding.launch_id,
        binding.challenge,
    )
    assert (expected.plugin_id, expected.artifact_digest, expected.process_epoch) == (
        binding.plugin_id,
        binding.artifact_digest,
        binding.process_epoch,
    )
    assert (binding.plan_id, binding.plugin_id, binding.artifact_digest) == (
        "plan-7",
        "plugin:dla",
        DIGEST,
    )
    assert binding.launch_id == launch_id
    assert binding.enroll_socket == (directory / "enroll.sock").absolute()
    assert binding.evidence_dir == (directory / "evidence").absolute()
    assert env["ECPA_EMIT_INTERVAL_S"] == "2"
    # The supervisor's own identity: this process ran `ecpa run` in-process.
    assert expected.supervisor == read_identity()
    assert expected.slots == (Slot("scheduler", 0),)
    doc = read_json(directory / "launch.json")
    assert doc["issuer"] == env["ECPA_ISSUER"] == "urn:ecpa:issuer:test"
    assert "kid" not in doc
    assert doc["subject"] == "host-runtime"
    assert doc["emit_interval_s"] == 2
    assert doc["heartbeat_window_s"] == 6  # 3 emit intervals
    assert before <= doc["started_at"] <= after
    # Nothing enrolled (the command made no observer): an empty trust store.
    assert len(TrustStore.load(directory / "trust.json")) == 0
    exit_doc = read_json(directory / "exit.json")
    assert exit_doc == {
        "schema": "ecpa-launch-exit/0.1",
        "ended_at": exit_doc["ended_at"],
        "exit_status": 0,
        "signal": None,
        "error": None,
    }
    assert doc["started_at"] <= exit_doc["ended_at"] <= after


def test_challenge_and_launch_are_fresh_each_run(tmp_path: Path) -> None:
    envs = []
    for i in range(2):
        dump = tmp_path / f"env-{i}.json"
        assert run(tmp_path, sys.executable, "-c", DUMP, str(dump)).status == 0
        envs.append(read_json(dump))
    for env in envs:
        assert len(env["ECPA_CHALLENGE"]) >= 22  # 128 bits as base64url
        assert len(b64u_decode(env["ECPA_CHALLENGE"], what="challenge")) >= 16
    for name in ("ECPA_CHALLENGE", "ECPA_LAUNCH_ID", "ECPA_ENROLL_SOCKET"):
        assert envs[0][name] != envs[1][name]
    assert envs[0]["ECPA_PLAN_ID"] == envs[1]["ECPA_PLAN_ID"]
    assert len(launch_dirs(tmp_path)) == 2


def test_the_child_keeps_the_callers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECPA_TRUST_STORE", "kept.json")  # not a binding variable
    monkeypatch.setenv("SOME_SETTING", "kept")
    script = "import os, sys; sys.exit(os.environ['SOME_SETTING'] != 'kept' or 4)"
    assert run(tmp_path, sys.executable, "-c", script).status == 4


@pytest.mark.parametrize(
    "names", [("ECPA_LAUNCH_ID",), ("ECPA_CHALLENGE", "ECPA_KID"), ("ECPA_EMIT_INTERVAL_S",)]
)
def test_caller_supplied_binding_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]
) -> None:
    for name in names:
        monkeypatch.setenv(name, "")  # even empty: present is refused
    marker = tmp_path / "started"
    result = run(tmp_path, sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert result.status == 2
    assert "ECPA_INVALID_INPUT" in result.err
    for name in names:
        assert name in result.err
    assert not marker.exists()  # the child never started
    assert launch_dirs(tmp_path) == []  # and nothing was written


@pytest.mark.parametrize(
    ("changes", "member"),
    [
        ({"surprise": 1}, "surprise"),
        ({"artifact_digest": "sha256:1234"}, "artifact_digest"),
        ({"emit_interval_s": 0}, "emit_interval_s"),
        ({"emit_interval_s": "fast"}, "emit_interval_s"),
        ({"plugin_id": None}, "plugin_id"),
    ],
)
def test_bad_plan_exits_2_naming_the_member(
    tmp_path: Path, changes: dict[str, Any], member: str
) -> None:
    doc = {**PLAN, **changes}
    plan = tmp_path / "bad-plan.json"
    plan.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    result = run(tmp_path, "true", plan=plan)
    assert result.status == 2
    assert result.err.startswith("ecpa: ECPA_INVALID_INPUT: ")
    assert member in result.err
    assert launch_dirs(tmp_path) == []


def test_usage_errors(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    runs = ("--evidence-dir", tmp_path / "runs")
    no_command = ecpa_main("run", "--plan", plan, *runs)
    assert no_command.status == 2
    assert "expected a COMMAND" in no_command.err
    for grace in ("-1", "inf", "nan"):
        assert ecpa_main("run", "--plan", plan, *runs, "--grace", grace, "--", "true").status == 2
    assert ecpa_main("run", "--plan", tmp_path / "missing.json", *runs, "--", "true").status == 2
    assert launch_dirs(tmp_path) == []
    help_text = ecpa_main("run", "--help")
    assert help_text.status == 0
    assert "ecpa run --plan plan.json" in help_text.out


@pytest.mark.parametrize(
    ("script", "status", "signum"),
    [
        ("pass", 0, None),
        ("raise SystemExit(3)", 3, None),
        ("raise SystemExit(255)", 255, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9, 9),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + 15, 15),
    ],
)
def test_exit_status_passes_through(
    tmp_path: Path, script: str, status: int, signum: int | None
) -> None:
    result = run(tmp_path, sys.executable, "-c", script)
    assert result.status == status
    exit_doc = read_json(only_launch(tmp_path) / "exit.json")
    assert (exit_doc["exit_status"], exit_doc["signal"], exit_doc["error"]) == (
        status,
        signum,
        None,
    )
    if signum is not None:
        assert f"killed by {signal.Signals(signum).name}" in result.err


def test_options_of_the_command_are_not_parsed(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    args = ("run", "--plan", plan, "--evidence-dir", tmp_path / "runs")
    script = "import sys; sys.exit(len(sys.argv))"  # argv: -c --plan x -> 3
    assert ecpa_main(*args, "--", sys.executable, "-c", script, "--plan", "x").status == 3
    assert ecpa_main(*args, sys.executable, "-c", script, "--help", "-v").status == 3


def test_command_not_found_is_127_and_recorded(tmp_path: Path) -> None:
    result = run(tmp_path, "no-such-command-ecpa-test", "--flag")
    assert result.status == 127
    assert "no-such-command-ecpa-test: command not found" in result.err
    directory = only_launch(tmp_path)
    exit_doc = read_json(directory / "exit.json")
    assert exit_doc["exit_status"] == 127
    assert "command not found" in exit_doc["error"]
    assert read_json(directory / "trust.json")["keys"] == []


def test_command_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    assert run(tmp_path, str(script)).status == 126


def test_status_of_a_finished_launch_is_false(tmp_path: Path) -> None:
    assert run(tmp_path, "true").status == 0
    result = ecpa_main("status", "--launch", only_launch(tmp_path))
    assert result.status == 1
    assert result.lines[0] == "runtime_effective: false"


def test_default_plan_from_a_monkeypatched_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_run_bundle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "vllm-hust-extension-v1.json").write_bytes(b'{"bundle": 1}')
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint(
        "org.vllm-hust.dla", "fake_run_bundle", "vllm.extension_bundles"
    )
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **_: importlib.metadata.EntryPoints([ep])
    )
    dump = tmp_path / "env.json"
    args = ("run", "--evidence-dir", tmp_path / "runs", "--", sys.executable, "-c", DUMP)
    try:
        result = ecpa_main(*args, str(dump))
    finally:
        sys.modules.pop("fake_run_bundle", None)
    assert result.status == 0, result.err
    env = read_json(dump)
    assert env["ECPA_PLUGIN_ID"] == "org.vllm-hust.dla/victim-selector"
    assert env["ECPA_ARTIFACT_DIGEST"] == "sha256:" + hashlib.sha256(b'{"bundle": 1}').hexdigest()
    assert env["ECPA_PLAN_ID"].startswith("plan:sha256:")
    assert env["ECPA_EMIT_INTERVAL_S"] == "1"
    # With no bundle at all, the message says what to do.
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **_: importlib.metadata.EntryPoints([])
    )
    result = ecpa_main(*args, str(dump))
    assert result.status == 2
    assert "expected --plan FILE or an installed org.vllm-hust.dla bundle, found none" in (
        result.err
    )


# --- the library ---------------------------------------------------------------------------


def _enrolled_entry(launch: Launch, kid: str = "scheduler.0-4242-1000") -> dict[str, Any]:
    """An entry as enrollment adds it, written into the launch's trust store."""
    entry = {
        "issuer": launch.plan.issuer,
        "kid": kid,
        "public_key_b64": SigningKey.from_seed(b"k" * 32).public_key.to_b64(),
        "subjects": ["host-runtime"],
        "enabled": True,
        "not_before": launch.started_at - 5,
        "not_after": launch.ends_at,
    }
    doc = read_json(launch.trust_file)
    doc["keys"].append(entry)
    launch.trust_file.write_text(json.dumps(doc))
    return entry


def test_library_prepare_run_finish(tmp_path: Path) -> None:
    plan = plan_from_dict(PLAN, "plan", default_issuer="unused")
    launch = prepare_launch(plan, tmp_path / "a" / "b", now=1_800_000_000, environ={"X": "1"})
    assert launch.directory.parent == tmp_path / "a" / "b"
    assert dict(launch.env) == {"X": "1", **launch.binding}
    assert launch_from_file(launch.launch_file).launch_id == launch.launch_id
    assert read_json(launch.trust_file)["keys"] == []
    result = run_launch(launch, ["sh", "-c", 'test "$X" = 1 && exit 5'], grace=0)
    assert result == LaunchExit(5)
    assert not launch.enroll_socket.exists()  # closed with the launch
    entry = _enrolled_entry(launch)
    assert (entry["not_before"], entry["not_after"]) == (1_800_000_000 - 5, 1_800_086_400)
    finish_launch(launch, ended_at=1_800_000_100, result=result)
    entry = read_json(launch.trust_file)["keys"][0]
    assert entry["not_after"] == 1_800_000_100
    # A clock that went back still leaves a valid (empty) window.
    finish_launch(launch, ended_at=1_700_000_000, result=result)
    entry = read_json(launch.trust_file)["keys"][0]
    assert entry["not_after"] == entry["not_before"]
    TrustStore.load(launch.trust_file)


def test_library_finish_keeps_a_disabled_key_disabled(tmp_path: Path) -> None:
    plan = plan_from_dict(PLAN, "plan", default_issuer="unused")
    launch = prepare_launch(plan, tmp_path, now=1_800_000_000, environ={})
    _enrolled_entry(launch)
    doc = read_json(launch.trust_file)
    doc["keys"][0]["enabled"] = False
    launch.trust_file.write_text(json.dumps(doc))
    finish_launch(launch, ended_at=1_800_000_010, result=LaunchExit(0))
    entry = read_json(launch.trust_file)["keys"][0]
    assert (entry["enabled"], entry["not_after"]) == (False, 1_800_000_010)


def test_finish_writes_exit_json_even_when_the_trust_store_fails(tmp_path: Path) -> None:
    """A failure closing the window (trust.json) skipped exit.json."""
    plan = plan_from_dict(PLAN, "plan", default_issuer="unused")
    launch = prepare_launch(plan, tmp_path, now=1_800_000_000, environ={})
    launch.trust_file.write_text("{broken")  # cannot be read, so cannot be closed
    with pytest.raises(ecpa.EcpaError) as exc_info:
        finish_launch(launch, ended_at=1_800_000_020, result=LaunchExit(0))
    assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT
    assert "trust.json" in exc_info.value.detail  # names the file it could not write
    assert read_json(launch.exit_file)["ended_at"] == 1_800_000_020
    # and status says the launch ended, not an error about the store
    status = status_from_launch_dir(launch.directory, now=1_800_000_030)
    assert not status.effective
    assert status.reasons[0].code.value == "launch_ended"
    assert status.reasons[0].text.startswith("launch ended at 1800000020")  # the recorded end


def test_finish_closes_the_window_even_when_exit_json_fails(tmp_path: Path) -> None:
    plan = plan_from_dict(PLAN, "plan", default_issuer="unused")
    launch = prepare_launch(plan, tmp_path, now=1_800_000_000, environ={})
    _enrolled_entry(launch)
    launch.exit_file.mkdir()  # exit.json cannot be replaced by a file
    with pytest.raises(ecpa.EcpaError) as exc_info:
        finish_launch(launch, ended_at=1_800_000_020, result=LaunchExit(0))
    assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT
    assert "exit.json" in exc_info.value.detail  # names the file it could not write
    assert read_json(launch.trust_file)["keys"][0]["not_after"] == 1_800_000_020


def test_library_refuses_bad_inputs(tmp_path: Path) -> None:
    plan = plan_from_dict(PLAN, "plan", default_issuer="unused")
    for kwargs in (
        {"now": -1, "environ": {}},
        {"now": 2**53 - 10, "environ": {}},  # the window would end past 2**53-1
        {"now": 1_800_000_000, "environ": {"ECPA_PLAN_ID": "x"}},
    ):
        with pytest.raises(ecpa.EcpaError) as exc_info:
            prepare_launch(plan, tmp_path, **kwargs)  # type: ignore[arg-type]
        assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT
    assert list(tmp_path.iterdir()) == []
    launch = prepare_launch(plan, tmp_path, now=1_800_000_000, environ={})
    for command, grace in (([], 1.0), ([""], 1.0), (["true"], -1.0), (["true"], float("nan"))):
        with pytest.raises(ecpa.EcpaError):
            run_launch(launch, command, grace=grace)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ecpa.EcpaError) as exc_info:
        prepare_launch(plan, blocker / "runs", now=1_800_000_000, environ={})
    assert exc_info.value.code is ecpa.ErrorCode.INVALID_INPUT


# --- signals, with a real `ecpa` process -----------------------------------------------------

#: Traps SIGTERM (writes term-PID and exits 42); the group leader (argv[2] == "leader")
#: first starts a member of its group running the same script. Each writes ready-PID.
TRAP = """
import os, signal, subprocess, sys, time
out = sys.argv[1]
def on_term(signum, frame):
    open(os.path.join(out, f"term-{os.getpid()}"), "w").close()
    os._exit(42)
signal.signal(signal.SIGTERM, on_term)
if sys.argv[2:] == ["leader"]:
    subprocess.Popen([sys.executable, "-c", SCRIPT, out])
open(os.path.join(out, f"ready-{os.getpid()}"), "w").close()
time.sleep(30)
"""
TRAP = "SCRIPT = " + repr(TRAP) + "\n" + TRAP
IGNORE = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.path.join(sys.argv[1], f"ready-{os.getpid()}"), "w").close()
time.sleep(30)
"""


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:  # SIGTERM first: ecpa run then stops and reaps its whole tree
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_ecpa(
    tmp: Path, procs: list[subprocess.Popen[bytes]], *command: str, grace: str = "10"
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in BINDING_NAMES}
    env["PYTHONPATH"] = str(ROOT)
    args = [str(ECPA), "run", "--plan", str(write_plan(tmp)), "--evidence-dir", str(tmp / "runs")]
    proc = subprocess.Popen(
        [*args, "--grace", grace, "--", *command], env=env, stderr=subprocess.PIPE
    )
    procs.append(proc)
    return proc


def wait_for(tmp: Path, prefix: str, count: int, timeout: float = 15.0) -> list[Path]:
    deadline = time.monotonic() + timeout
    while True:
        found = sorted(tmp.glob(f"{prefix}-*"))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_sigterm_is_forwarded_to_the_childs_group(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    proc = start_ecpa(tmp_path, spawned, sys.executable, "-c", TRAP, str(tmp_path), "leader")
    assert len(wait_for(tmp_path, "ready", 2)) == 2
    ready_pids = {int(p.name.split("-")[1]) for p in tmp_path.glob("ready-*")}
    for pid in ready_pids:  # the child and its member run in a session of their own
        assert os.getsid(pid) != os.getsid(0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 42  # the leader's own exit status
    terms = {int(p.name.split("-")[1]) for p in wait_for(tmp_path, "term", 2)}
    assert terms == ready_pids  # leader and member both got it
    assert proc.stderr is not None
    assert "exited with status 42" in proc.stderr.read().decode()
    assert read_json(only_launch(tmp_path) / "exit.json")["exit_status"] == 42


def test_a_child_ignoring_sigterm_is_killed_after_grace(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    proc = start_ecpa(tmp_path, spawned, sys.executable, "-c", IGNORE, str(tmp_path), grace="0.5")
    assert len(wait_for(tmp_path, "ready", 1)) == 1
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 128 + signal.SIGKILL
    assert 0.4 <= time.monotonic() - sent < 8
    exit_doc = read_json(only_launch(tmp_path) / "exit.json")
    assert (exit_doc["exit_status"], exit_doc["signal"]) == (137, 9)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_sigint_and_sighup_are_forwarded(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]], signum: signal.Signals
) -> None:
    script = IGNORE.replace("signal.SIGTERM, signal.SIG_IGN", f"{signum}, signal.SIG_DFL")
    proc = start_ecpa(tmp_path, spawned, sys.executable, "-c", script, str(tmp_path))
    assert len(wait_for(tmp_path, "ready", 1)) == 1
    proc.send_signal(signum)
    assert proc.wait(timeout=15) == 128 + signum  # the child died of it: forwarded


#: The observer a scheduler process makes (its own key, enrolled through ecpa run's socket),
#: one selection, one record written; then `ecpa status` about the running launch, whose
#: exit status this exits with (0 when runtime_effective is true).
SIGNER = """
import os, subprocess, sys
from ecpa.observer import SELECTION, process_observer
obs = process_observer()
assert obs is not None, "no observer"
obs.count(SELECTION)
assert obs.flush(timeout=10), "not written"
launch_dir = os.path.dirname(os.environ["ECPA_EVIDENCE_DIR"])
status = subprocess.run([sys.argv[1], "status", "--launch", launch_dir])
sys.exit(status.returncode)
"""


def test_status_true_during_the_launch_and_false_after(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """The launch directory `ecpa run` writes is what `ecpa status` reads: evidence signed
    by its live child with the key it enrolled is effective; once the child exits, the
    key's window is closed and the process gone."""
    proc = start_ecpa(tmp_path, spawned, sys.executable, "-c", SIGNER, str(ECPA))
    assert proc.wait(timeout=30) == 0  # `ecpa status` inside the launch said true
    after = subprocess.run(
        [str(ECPA), "status", "--launch", str(only_launch(tmp_path))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert after.returncode == 1
    assert after.stdout.startswith("runtime_effective: false\n")


def test_an_in_process_run_gives_the_callers_signal_handlers_back(tmp_path: Path) -> None:
    """Only the installed script keeps the signals ignored after supervision (it exits at
    once); a caller in-process gets its handlers back, or its later children would inherit
    ignored signals."""
    before = {s: signal.getsignal(s) for s in FORWARDED}
    assert run(tmp_path, "true").status == 0
    assert {s: signal.getsignal(s) for s in FORWARDED} == before


def test_slots_option_overrides_the_plans(tmp_path: Path) -> None:
    result = run(tmp_path, "true", extra=("--slots", "scheduler.0, scheduler.1,prefill.0"))
    assert result.status == 0, result.err
    expected = launch_from_file(only_launch(tmp_path) / "launch.json")
    assert expected.slots == (Slot("scheduler", 0), Slot("scheduler", 1), Slot("prefill", 0))
    (tmp_path / "bad").mkdir()
    for bad in ("scheduler", "scheduler.x", "Scheduler.0", "scheduler.0,scheduler.0", ""):
        result = run(tmp_path / "bad", "true", extra=("--slots", bad))
        assert result.status == 2, (bad, result.err)
        assert "ECPA_INVALID_INPUT" in result.err


def test_a_chosen_launch_id_is_used_once_and_said_as_json(tmp_path: Path) -> None:
    """The launch id was random and said only in a line on stderr: a sidecar or a unit file
    could not know its --launch path in advance."""
    from tests._launch_helpers import ecpa_cmd

    runs = tmp_path / "runs"
    chosen = "launch-0123456789abcdef"
    args = ("run", "--evidence-dir", runs, "--launch-id", chosen, "--json", "--", "true")
    out = ecpa_cmd(*args)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stderr.splitlines()[0])
    assert record["launch_id"] == chosen
    assert record["directory"].endswith(f"runs/{chosen}")
    assert record["slots"] == ["scheduler.0"]
    assert (runs / chosen / "exit.json").is_file()
    again = ecpa_cmd(*args)
    assert again.returncode == 2
    assert "never reused" in again.stderr
    for bad in ("launch-0123", "launch-0123456789ABCDEF", "../launch-0123456789abcdef", "x"):
        refused = ecpa_cmd("run", "--evidence-dir", runs, "--launch-id", bad, "--", "true")
        assert refused.returncode == 2, bad
        assert "expected a launch id of launch- and 16 lowercase hex digits" in refused.stderr
    assert sorted(p.name for p in runs.iterdir()) == [chosen]
