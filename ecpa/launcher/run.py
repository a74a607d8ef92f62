"""The manager's launch (RUNTIME.md "Actors", "Launch binding", "Launch directory").

``ecpa run`` in three steps, each usable on its own:

1. :func:`prepare_launch` makes a fresh launch of a :class:`~ecpa.runtime.launch.Plan`: a random
   launch id and challenge, a per-launch Ed25519 key, and the launch directory
   ``EVIDENCE_DIR/<launch_id>/`` (mode 0700) holding ``signing-key.pem`` (0600),
   ``trust.json`` (the key, for ``host-runtime`` only, valid from shortly before the start
   for the plan's maximum duration), ``evidence/`` (0700, with an empty log) and
   ``launch.json``, all complete on disk before any command starts: a crash of the manager
   loses nothing. It refuses a caller's environment that already holds a binding variable.
2. :func:`run_launch` runs the command with the binding in its environment, in a session
   of its own, forwarding SIGINT, SIGTERM and SIGHUP to its process group and killing the
   group ``grace`` seconds after the first of them.
3. :func:`finish_launch` closes the key's window at the exit time (records issued before
   stay verifiable at a time within it; nothing signed later is accepted) and writes
   ``exit.json``.

Time is a parameter: the caller reads the clock.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.launcher.plan import (
    BUNDLE_GROUP,
    BUNDLE_NAME,
    DEFAULT_PLUGIN_ID,
    default_issuer,
    default_plan,
    load_plan,
)
from ecpa.launcher.signals import FORWARDED, LaunchExit, run_forwarding
from ecpa.profile._json import MAX_SAFE_INTEGER
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore, read_document
from ecpa.runtime.launch import EXIT_SCHEMA, LAUNCH_SUBJECT, Plan, launch_document, plan_from_dict
from ecpa.runtime.process import ENV_NAMES

__all__ = [
    "BINDING_NAMES",
    "BUNDLE_GROUP",
    "BUNDLE_NAME",
    "DEFAULT_PLUGIN_ID",
    "EXIT_SCHEMA",
    "FORWARDED",
    "Launch",
    "LaunchExit",
    "Plan",
    "check_environment",
    "default_issuer",
    "default_plan",
    "finish_launch",
    "load_plan",
    "prepare_launch",
    "run_launch",
]

#: What the manager sets for the command: RUNTIME.md's binding and the observer's cadence.
BINDING_NAMES = (*ENV_NAMES, "ECPA_EMIT_INTERVAL_S")
#: The key's window opens this long before the start, for clocks a little behind.
CLOCK_SKEW_S = 5
_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600


def _bad(detail: str) -> EcpaError:
    return EcpaError(ErrorCode.INVALID_INPUT, detail)


@dataclass(frozen=True)
class Launch:
    """One prepared launch: its identity, its directory and the command's environment."""

    plan: Plan
    launch_id: str
    challenge: str
    kid: str
    started_at: int
    directory: Path
    public_key_b64: str
    #: The variables the launch adds (:data:`BINDING_NAMES`).
    binding: Mapping[str, str] = field(hash=False)
    #: The command's whole environment: the caller's, plus :attr:`binding`.
    env: Mapping[str, str] = field(hash=False, repr=False)

    @property
    def launch_file(self) -> Path:
        """``launch.json``: what the launch's evidence must be bound to."""
        return self.directory / "launch.json"

    @property
    def trust_file(self) -> Path:
        """``trust.json``: the launch's trust store, its key alone."""
        return self.directory / "trust.json"

    @property
    def key_file(self) -> Path:
        """``signing-key.pem``: the launch's private key (mode 0600)."""
        return self.directory / "signing-key.pem"

    @property
    def evidence_dir(self) -> Path:
        """``evidence/``: the ``ECPA_EVIDENCE_DIR`` (mode 0700)."""
        return self.directory / "evidence"

    @property
    def log_file(self) -> Path:
        """``evidence/<launch_id>.jsonl``: the evidence log."""
        return self.evidence_dir / f"{self.launch_id}.jsonl"

    @property
    def exit_file(self) -> Path:
        """``exit.json``: how the command ended, once it has."""
        return self.directory / "exit.json"


def check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a caller's environment that already holds a binding variable: the binding is
    the manager's alone, never passed through and never silently replaced.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the variables found.
    """
    found = [name for name in BINDING_NAMES if name in environ]
    if found:
        raise _bad(
            "expected no launch binding in the caller's environment (ecpa run sets it), "
            f"found {found}"
        )


def _io_error(what: str, path: Path, exc: OSError) -> EcpaError:
    return _bad(f"expected to {what} {path}, found: {exc.strerror or exc}")


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the first byte on (never over a file, never
    through a symlink), write ``data`` whole and sync it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, _PRIVATE_FILE)
    try:
        os.fchmod(fd, _PRIVATE_FILE)  # whatever the umask left
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` whole or not at all: a new file renamed into place, then the
    directory synced, so a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        _write_new(tmp, data)
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _io_error("write", path, exc) from None


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _private_dir(path: Path) -> None:
    os.mkdir(path, _PRIVATE_DIR)  # a new directory: never one someone prepared
    os.chmod(path, _PRIVATE_DIR)  # whatever the umask left


def _trust_doc(launch: Launch, not_after: int, *, enabled: bool = True) -> dict[str, Any]:
    not_before = max(0, launch.started_at - CLOCK_SKEW_S)
    entry = {
        "issuer": launch.plan.issuer,
        "kid": launch.kid,
        "public_key_b64": launch.public_key_b64,
        "subjects": [LAUNCH_SUBJECT],
        "enabled": enabled,
        "not_before": not_before,
        "not_after": max(not_before, not_after),
    }
    return {"schema": TRUST_STORE_SCHEMA, "keys": [entry]}


def _time(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INTEGER:
        raise _bad(f"expected {what} as Unix seconds within [0, 2**53-1], found {value!r}")
    return value


def prepare_launch(
    plan: Plan, evidence_dir: Path, *, now: int, environ: Mapping[str, str]
) -> Launch:
    """Make a fresh launch of ``plan`` started at ``now``, in ``evidence_dir/<launch_id>/``
    (``evidence_dir`` is created with mode 0700 if missing), and the command's environment:
    ``environ`` plus the binding. Nothing is written when ``environ`` is refused.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a binding variable in ``environ``, a plan
            that breaks a rule, a bad ``now``, or a directory that cannot be written.
    """
    check_environment(environ)
    plan = plan_from_dict(plan.to_dict(), "plan", default_issuer=plan.issuer)
    _time(now, "now")
    end = _time(now + plan.max_duration_s, "the end of the launch (now + max_duration_s)")
    token = secrets.token_hex(8)
    key = SigningKey.generate()
    root = Path(evidence_dir)
    try:
        os.makedirs(root, _PRIVATE_DIR, exist_ok=True)
        directory = root / f"launch-{token}"
        _private_dir(directory)
    except OSError as exc:
        raise _io_error("create a launch directory in", root, exc) from None
    absolute = directory.absolute()  # the command may change its working directory
    binding = {
        "ECPA_PLAN_ID": plan.plan_id,
        "ECPA_LAUNCH_ID": f"launch-{token}",
        "ECPA_CHALLENGE": secrets.token_urlsafe(32),  # 256 bits (RUNTIME: at least 128)
        "ECPA_PLUGIN_ID": plan.plugin_id,
        "ECPA_ARTIFACT_DIGEST": plan.artifact_digest,
        "ECPA_ISSUER": plan.issuer,
        "ECPA_KID": f"launch-key-{token}",
        "ECPA_SIGNING_KEY_FILE": str(absolute / "signing-key.pem"),
        "ECPA_EVIDENCE_DIR": str(absolute / "evidence"),
        "ECPA_PROCESS_EPOCH": str(plan.process_epoch),
        "ECPA_EMIT_INTERVAL_S": str(plan.emit_interval_s),
    }
    launch = Launch(
        plan=plan,
        launch_id=binding["ECPA_LAUNCH_ID"],
        challenge=binding["ECPA_CHALLENGE"],
        kid=binding["ECPA_KID"],
        started_at=now,
        directory=directory,
        public_key_b64=key.public_key.to_b64(),
        binding=MappingProxyType(binding),
        env=MappingProxyType({**environ, **binding}),
    )
    try:
        _write_directory(launch, key, end)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # ours, just made: no half launch left
        raise
    return launch


def _write_directory(launch: Launch, key: SigningKey, end: int) -> None:
    trust = _trust_doc(launch, end)
    TrustStore.from_dict(trust)  # every rule of PROFILE §5 before anything is written
    try:
        _write_new(launch.key_file, key.to_pem())
        _private_dir(launch.evidence_dir)
        _write_new(launch.log_file, b"")  # so a launch without evidence reads as "none yet"
    except OSError as exc:
        raise _io_error("write the launch directory", launch.directory, exc) from None
    _write_atomic(launch.trust_file, _json_bytes(trust))
    doc = launch_document(
        launch.plan,
        launch_id=launch.launch_id,
        challenge=launch.challenge,
        kid=launch.kid,
        started_at=launch.started_at,
    )
    _write_atomic(launch.launch_file, _json_bytes(doc))  # last: a complete launch


def run_launch(launch: Launch, command: Sequence[str], *, grace: float = 10.0) -> LaunchExit:
    """Run ``command`` (a program and its arguments, looked up on the environment's
    ``PATH``) with the launch's environment, in a session of its own, and wait for it.

    SIGINT, SIGTERM and SIGHUP received meanwhile are forwarded to its process group, and
    ``grace`` seconds after the first, the group gets SIGKILL. Signals are caught only when
    called from the main thread. A command that cannot be started is not an error: its
    :class:`LaunchExit` has status 127 (not found) or 126 (not executable).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an empty command or a negative ``grace``.
    """
    if not command or not command[0]:
        raise _bad("expected a COMMAND to run, found none")
    if not (math.isfinite(grace) and grace >= 0):
        raise _bad(f"expected a grace period >= 0 seconds, found {grace}")
    return run_forwarding(command, dict(launch.env), grace=grace)


def _closed_trust(launch: Launch, ended_at: int) -> dict[str, Any]:
    """The launch's trust store with its key's window ending at ``ended_at``. Other
    changes made meanwhile (a disabled key) stay; a store that no longer loads is
    replaced by the launch's entry, disabled (fail closed)."""
    try:
        doc = read_document(launch.trust_file)
        TrustStore.from_dict(doc)
    except EcpaError:
        return _trust_doc(launch, ended_at, enabled=False)
    for entry in doc["keys"]:
        if (entry["issuer"], entry["kid"]) == (launch.plan.issuer, launch.kid):
            entry["not_after"] = max(entry["not_before"], min(entry["not_after"], ended_at))
    return doc


def finish_launch(launch: Launch, *, ended_at: int, result: LaunchExit) -> None:
    """Record the end of a launch: rewrite ``trust.json`` (atomically) with the key's
    window closed at ``ended_at``, then write ``exit.json``: ``{"schema":
    "ecpa-launch-exit/0.1", "ended_at", "exit_status", "signal", "error"}``.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a bad ``ended_at`` or a file that cannot be
            written.
    """
    _time(ended_at, "ended_at")
    _write_atomic(launch.trust_file, _json_bytes(_closed_trust(launch, ended_at)))
    record = {
        "schema": EXIT_SCHEMA,
        "ended_at": ended_at,
        "exit_status": result.status,
        "signal": result.signal,
        "error": result.error,
    }
    _write_atomic(launch.exit_file, _json_bytes(record))
