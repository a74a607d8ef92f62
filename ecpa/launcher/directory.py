"""A launch and its directory (RUNTIME.md "Launch directory"; "Round 3", "Directories").

:class:`Launch` is what :func:`~ecpa.launcher.run.prepare_launch` made. Once made, the
directory is worked on through a descriptor (:func:`open_launch_dir`, checked to be the very
directory made: same device and inode), never through its path again: enrollment's writes
of ``trust.json`` and :func:`finish_launch`'s go to the launch's own directory even when
someone renames it while the launch runs, and a directory put in its place is refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.launcher._write import identity, json_bytes, open_directory, write_atomic
from ecpa.launcher.manager import Certifier, ManagerKey
from ecpa.launcher.supervise import LaunchExit
from ecpa.profile.json.strict_json import MAX_SAFE_INTEGER
from ecpa.runtime import (
    EXIT_SCHEMA,
    ExpectedLaunch,
    Plan,
    ProcessIdentity,
    launch_document,
    update_trust_file,
)

__all__ = ["Launch", "finish_launch", "moved_away", "open_launch_dir", "sealed"]


def _time(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INTEGER:
        raise invalid_input(f"expected {what} as Unix seconds within [0, 2**53-1], found {value!r}")
    return value


@dataclass(frozen=True)
class Launch:
    """One prepared launch: its identity, its directory and the command's environment."""

    plan: Plan
    launch_id: str
    challenge: str
    started_at: int
    directory: Path
    supervisor: ProcessIdentity
    #: The variables the launch adds.
    binding: Mapping[str, str] = field(hash=False)
    #: The command's whole environment: the caller's, plus :attr:`binding`.
    env: Mapping[str, str] = field(hash=False, repr=False)
    #: The supervisor's children from before the command (pid, start ticks): not members.
    excluded: frozenset[tuple[int, int]] = frozenset()
    #: The directory's device and inode as made: what :func:`open_launch_dir` checks.
    inode: tuple[int, int] = (0, 0)

    def record(self) -> dict[str, Any]:
        """The launch as ``ecpa run --json`` says it (docs/cli.md, "ecpa run")."""
        return {
            "launch_id": self.launch_id,
            "directory": str(self.directory),
            "plan_id": self.plan.plan_id,
            "plugin_id": self.plan.plugin_id,
            "slots": [slot.name for slot in self.plan.slots],
            "started_at": self.started_at,
            "supervisor_pid": self.supervisor.pid,
        }

    @property
    def expected(self) -> ExpectedLaunch:
        """What its evidence, and the manager's certificates, are bound to."""
        return ExpectedLaunch(
            plan_id=self.plan.plan_id,
            launch_id=self.launch_id,
            plugin_id=self.plan.plugin_id,
            artifact_digest=self.plan.artifact_digest,
            process_epoch=self.plan.process_epoch,
            challenge=self.challenge,
        )

    def document(self) -> bytes:
        """``launch.json``'s exact bytes (as :func:`~ecpa.launcher.run.prepare_launch` writes
        them, and the manager's launch certificate seals them)."""
        doc = launch_document(
            self.plan,
            launch_id=self.launch_id,
            challenge=self.challenge,
            started_at=self.started_at,
            supervisor=self.supervisor,
            excluded=self.excluded,
        )
        return json_bytes(doc)

    @property
    def launch_file(self) -> Path:
        """``launch.json``: what the launch's evidence must be bound to."""
        return self.directory / "launch.json"

    @property
    def trust_file(self) -> Path:
        """``trust.json``: the launch's trust store, its enrolled process keys."""
        return self.directory / "trust.json"

    @property
    def enroll_socket(self) -> Path:
        """``enroll.sock``: where scheduler processes enroll their keys (mode 0600)."""
        return self.directory / "enroll.sock"

    @property
    def evidence_dir(self) -> Path:
        """``evidence/``: the ``ECPA_EVIDENCE_DIR`` (mode 0700)."""
        return self.directory / "evidence"

    @property
    def process_logs(self) -> Path:
        """``evidence/<launch_id>/``: one ``<kid>.jsonl`` log per process (mode 0700)."""
        return self.evidence_dir / self.launch_id

    @property
    def exit_file(self) -> Path:
        """``exit.json``: how the command ended, once it has."""
        return self.directory / "exit.json"

    @property
    def ends_at(self) -> int:
        """The end of the plan's maximum duration: no key is valid past it."""
        return self.started_at + self.plan.max_duration_s


def sealed(manager: ManagerKey, launch: Launch, dir_fd: int | None) -> Certifier:
    """The certifier of ``launch`` with ``manager``'s key, its first certificate written:
    the seal on ``launch.json``'s bytes, naming the supervisor (before the command starts).

    Raises:
        EcpaError: as :meth:`~ecpa.launcher.manager.Certifier.certify`.
    """
    certifier = Certifier(manager, launch.expected, launch.directory, dir_fd)
    certifier.seal(launch.document(), launch.supervisor, now=int(time.time()))
    return certifier


def open_launch_dir(launch: Launch) -> int:
    """The launch directory, opened (never through a symlink) and checked to be the one
    :func:`~ecpa.launcher.run.prepare_launch` made; the caller closes it.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when it cannot be opened, or when another
            directory is at its path now.
    """
    try:
        fd = open_directory(launch.directory)
    except OSError as exc:
        raise invalid_input(
            f"expected the launch directory at {launch.directory}, found: {exc.strerror or exc}"
        ) from None
    if launch.inode != (0, 0) and identity(fd) != launch.inode:
        os.close(fd)
        raise invalid_input(
            f"expected at {launch.directory} the directory made for {launch.launch_id}, found "
            "another one (moved or replaced since)"
        )
    return fd


def moved_away(launch: Launch, dir_fd: int) -> bool:
    """Whether the launch directory open as ``dir_fd`` is no longer at its path."""
    try:
        st = os.stat(launch.directory, follow_symlinks=False)
    except OSError:
        return True
    return (st.st_dev, st.st_ino) != identity(dir_fd)


def _closing(ended_at: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The change that ends every key's window at ``ended_at`` (each enrolled process key of
    the launch; other changes made meanwhile, a disabled key, stay)."""

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        keys = doc.get("keys")
        if not isinstance(keys, list):
            raise EcpaError(
                ErrorCode.TRUST_STORE_CONFIG,
                "expected the launch's trust store with a 'keys' array, "
                f"found {type(keys).__name__}",
            )
        for entry in keys:
            if isinstance(entry, dict) and type(entry.get("not_after")) is int:
                before = entry.get("not_before")
                floor = before if type(before) is int else 0
                entry["not_after"] = max(floor, min(entry["not_after"], ended_at))
        return doc

    return change


def finish_launch(
    launch: Launch,
    *,
    ended_at: int,
    result: LaunchExit,
    dir_fd: int | None = None,
    certifier: Certifier | None = None,
) -> None:
    """Record the end of a launch: a ``closed`` certificate for each key ``certifier``
    certified (its window ending at ``ended_at``), close every key's window at ``ended_at``
    in ``trust.json`` (under its lock, atomically), and write ``exit.json``: ``{"schema":
    "ecpa-launch-exit/0.1", "ended_at", "exit_status", "signal", "error"}``. Each is
    attempted even when the other fails (a full disk, say). Both are written in the launch
    directory open as ``dir_fd`` (default: :func:`open_launch_dir`), wherever it is now.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a bad ``ended_at``, a launch directory that is
            gone or replaced (``dir_fd`` not given), or naming every file that could not be
            written, after both were attempted.
    """
    _time(ended_at, "ended_at")
    if dir_fd is None:
        fd = open_launch_dir(launch)
        try:
            finish_launch(launch, ended_at=ended_at, result=result, dir_fd=fd, certifier=certifier)
        finally:
            os.close(fd)
        return
    problems: list[str] = []
    if certifier is not None:
        problems += certifier.close_all(ended_at, now=max(ended_at, int(time.time())))
    try:
        update_trust_file(launch.trust_file, _closing(ended_at), dir_fd=dir_fd)
    except EcpaError as exc:
        problems.append(f"closing the key windows in trust.json: {exc.detail}")
    record = {
        "schema": EXIT_SCHEMA,
        "ended_at": ended_at,
        "exit_status": result.status,
        "signal": result.signal,
        "error": result.error,
    }
    try:
        write_atomic(launch.exit_file, json_bytes(record), dir_fd=dir_fd)
    except EcpaError as exc:
        problems.append(f"writing exit.json: {exc.detail}")
    if problems:
        raise invalid_input("; ".join(problems))
