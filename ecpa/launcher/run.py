"""The manager's launch (RUNTIME.md "Actors", "Launch binding", "Launch directory", "Slots",
"Process keys").

``ecpa run`` in three steps, each usable on its own:

1. :func:`prepare_launch` makes a fresh launch of a :class:`~ecpa.runtime.model.plan.Plan`: a
   random launch id and challenge, and the launch directory ``EVIDENCE_DIR/<launch_id>/``
   (mode 0700) holding ``trust.json`` (no key yet: each scheduler process enrolls its own),
   ``evidence/<launch_id>/`` (0700, one log per process) and ``launch.json`` (with the
   supervisor's own identity), all complete on disk before any command starts. No private
   key is ever written. It refuses a caller's environment that already holds a binding
   variable, and an ``EVIDENCE_DIR`` that another user owns or that group or others may write.
2. :func:`run_launch` serves the enrollment socket ``enroll.sock`` and runs the command
   under :class:`~ecpa.launcher.supervise.Supervisor`: its own session, a child subreaper,
   the whole tree stopped when the command ends or on a signal.
3. :func:`finish_launch` closes every enrolled key's window at the exit time (records issued
   before stay verifiable at a time within it; nothing signed later is accepted) and writes
   ``exit.json``; each is attempted even when the other fails.

:func:`supervise_launch` is steps 2 and 3 with the signal handlers kept in place until the
last file is written. Time is a parameter, or a clock the caller passes.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from ecpa._files import check_private_dir as _check_private_dir
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.launcher._write import identity, json_bytes, open_directory, private_dir, write_atomic
from ecpa.launcher.directory import (
    Launch,
    _time,
    finish_launch,
    moved_away,
    open_launch_dir,
    sealed,
)
from ecpa.launcher.enroll import EnrollServer
from ecpa.launcher.environment import (
    BINDING_NAMES,
    PRIVATE_NAMES,
    check_environment,
    host_evidence_env,
)
from ecpa.launcher.manager import Certifier, ManagerKey, load_manager_key
from ecpa.launcher.plan import (
    BUNDLE_GROUP,
    BUNDLE_NAME,
    DEFAULT_PLUGIN_ID,
    default_issuer,
    default_plan,
    load_plan,
    with_host_evidence,
)
from ecpa.launcher.supervise import FORWARDED, LaunchExit, Supervisor
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.runtime import (
    BINDING_FIELDS,
    EXIT_SCHEMA,
    LAUNCH_DIR_NAME,
    Membership,
    Plan,
    ProcessIdentity,
    children_now,
    plan_from_dict,
    read_identity,
)

__all__ = [
    "BINDING_NAMES",
    "BUNDLE_GROUP",
    "BUNDLE_NAME",
    "DEFAULT_PLUGIN_ID",
    "EXIT_SCHEMA",
    "FORWARDED",
    "PRIVATE_NAMES",
    "Launch",
    "LaunchExit",
    "Plan",
    "check_environment",
    "check_private_dir",
    "default_issuer",
    "default_plan",
    "finish_launch",
    "host_evidence_env",
    "load_plan",
    "prepare_launch",
    "run_launch",
    "supervise_launch",
]

#: The key's window opens this long before the start, for clocks a little behind.
CLOCK_SKEW_S = 5
_PRIVATE_DIR = 0o700


def _io_error(what: str, path: Path, exc: OSError) -> EcpaError:
    return invalid_input(f"expected to {what} {path}, found: {exc.strerror or exc}")


def check_private_dir(path: Path, *, what: str = "directory") -> None:
    """:func:`ecpa._files.check_private_dir` with ``ECPA_INVALID_INPUT``.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the path, its owner and its mode.
    """
    _check_private_dir(path, ErrorCode.INVALID_INPUT, what=what)


def _evidence_root(root: Path) -> None:
    """``--evidence-dir``: made 0700 when missing, else refused unless private enough."""
    if not os.path.lexists(root):
        try:
            os.makedirs(root, _PRIVATE_DIR)
            os.chmod(root, _PRIVATE_DIR)
        except FileExistsError:
            pass  # made meanwhile: checked below like any existing directory
        except OSError as exc:
            raise _io_error("create the evidence directory", root, exc) from None
    check_private_dir(root, what="evidence directory")


def prepare_launch(
    plan: Plan,
    evidence_dir: Path,
    *,
    now: int,
    environ: Mapping[str, str],
    supervisor: ProcessIdentity | None = None,
    launch_id: str | None = None,
) -> Launch:
    """Make a fresh launch of ``plan`` started at ``now``, in ``evidence_dir/<launch_id>/``
    (``evidence_dir`` is created with mode 0700 if missing), and the command's environment:
    ``environ`` plus the binding. ``supervisor`` is the identity of the process that will
    run and supervise the command (default: this one); ``launch_id`` is the launch's id
    (``launch-`` and 16 lowercase hex digits, never one that exists; default: random).
    Nothing is written when ``environ`` or ``launch_id`` is refused.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a binding variable in ``environ``, a plan
            that breaks a rule, a bad ``now``, an evidence directory of another user or
            writable by group or others, or a directory that cannot be written.
    """
    check_environment(environ)
    if launch_id is not None and not LAUNCH_DIR_NAME.fullmatch(launch_id):
        raise invalid_input(
            f"expected a launch id of launch- and 16 lowercase hex digits, found {launch_id!r}"
        )
    plan = plan_from_dict(plan.to_dict(), "plan", default_issuer=plan.issuer)
    if plan.host_evidence == "required" and plan.host_policy is None:
        plan = with_host_evidence(plan, "required")  # the bundle's policy, or refused
    _time(now, "now")
    _time(now + plan.max_duration_s, "the end of the launch (now + max_duration_s)")
    boss = supervisor if supervisor is not None else read_identity()
    token = secrets.token_hex(8) if launch_id is None else launch_id.removeprefix("launch-")
    root = Path(evidence_dir)
    _evidence_root(root)
    directory = root / f"launch-{token}"
    if launch_id is not None and os.path.lexists(directory):
        raise invalid_input(
            f"expected a new launch id, found {launch_id} in {root} already (a launch id is "
            "never reused: choose another)"
        )
    fd = _make_launch_dir(root, directory)
    try:
        launch = _new_launch(plan, directory, now, environ, boss, inode=identity(fd))
        _write_directory(launch, fd)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # ours, just made: no half launch left
        raise
    finally:
        os.close(fd)
    return launch


def _make_launch_dir(root: Path, directory: Path) -> int:
    """Make ``directory`` (mode 0700) in ``root``, through a descriptor of ``root``, and
    return it open, checked to be new: empty, of mode 0700 and this user's."""
    try:
        parent = open_directory(root)
    except OSError as exc:
        raise _io_error("open the evidence directory", root, exc) from None
    try:
        private_dir(directory, dir_fd=parent)
        fd = open_directory(directory, dir_fd=parent)
    except OSError as exc:
        raise _io_error("create a launch directory in", root, exc) from None
    finally:
        os.close(parent)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != _PRIVATE_DIR or os.listdir(fd):
        os.close(fd)
        raise invalid_input(f"expected {directory} new, empty and private, found it replaced since")
    return fd


def _new_launch(
    plan: Plan,
    directory: Path,
    now: int,
    environ: Mapping[str, str],
    boss: ProcessIdentity,
    *,
    inode: tuple[int, int],
) -> Launch:
    token = directory.name.removeprefix("launch-")
    absolute = directory.absolute()  # the command may change its working directory
    values = {
        "plan_id": plan.plan_id,
        "launch_id": f"launch-{token}",
        "challenge": secrets.token_urlsafe(32),  # 256 bits (RUNTIME: at least 128)
        "plugin_id": plan.plugin_id,
        "artifact_digest": plan.artifact_digest,
        "issuer": plan.issuer,
        "evidence_dir": absolute / "evidence",
        "process_epoch": plan.process_epoch,
    }
    binding = {name: str(values[field]) for field, name in BINDING_FIELDS}
    binding["ECPA_ENROLL_SOCKET"] = str(absolute / "enroll.sock")
    binding["ECPA_EMIT_INTERVAL_S"] = str(plan.emit_interval_s)
    binding.update(host_evidence_env(binding["ECPA_PLAN_ID"], binding["ECPA_LAUNCH_ID"]))
    return Launch(
        plan=plan,
        launch_id=binding["ECPA_LAUNCH_ID"],
        challenge=binding["ECPA_CHALLENGE"],
        started_at=now,
        directory=directory,
        supervisor=boss,
        binding=MappingProxyType(binding),
        # A key's passphrase is ecpa's own, never the command's (nothing it runs needs it).
        env=MappingProxyType(
            {**{k: v for k, v in environ.items() if k not in PRIVATE_NAMES}, **binding}
        ),
        excluded=children_now(boss.pid),
        inode=inode,
    )


def _write_directory(launch: Launch, fd: int) -> None:
    """Everything of a new launch directory, written through ``fd`` (the directory made)."""
    trust = {"schema": TRUST_STORE_SCHEMA, "keys": []}
    TrustStore.from_dict(trust)
    try:
        private_dir(launch.evidence_dir, dir_fd=fd)
        evidence = open_directory(launch.evidence_dir, dir_fd=fd)
        try:
            private_dir(launch.process_logs, dir_fd=evidence)
        finally:
            os.close(evidence)
    except OSError as exc:
        raise _io_error("write the launch directory", launch.directory, exc) from None
    write_atomic(launch.trust_file, json_bytes(trust), dir_fd=fd)
    write_atomic(launch.launch_file, launch.document(), dir_fd=fd)  # last: a complete launch


def run_launch(
    launch: Launch,
    command: Sequence[str],
    *,
    grace: float = 10.0,
    say: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.time,
    supervisor: Supervisor | None = None,
    dir_fd: int | None = None,
    certifier: Certifier | None = None,
) -> LaunchExit:
    """Serve the launch's enrollment socket and run ``command`` (a program and its
    arguments, looked up on the environment's ``PATH``) with the launch's environment under
    a :class:`~ecpa.launcher.supervise.Supervisor`, until its whole tree is gone.

    Signals are recorded only while ``supervisor.handlers()`` is active (see
    :func:`supervise_launch`). Enrollment writes ``trust.json`` in the launch directory
    open as ``dir_fd`` (default: :func:`~ecpa.launcher.directory.open_launch_dir`, closed
    on return), wherever it is moved meanwhile; ``certifier`` certifies each key enrolled
    (default: one with :func:`~ecpa.launcher.manager.load_manager_key`'s key). A command
    that cannot be started is not an error: its :class:`LaunchExit` has status 127 (not
    found) or 126 (not executable).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an empty command, a negative ``grace``, a
            launch directory gone or replaced, or a socket that cannot be made.
    """
    if not command or not command[0]:
        raise invalid_input("expected a COMMAND to run, found none")
    if not (math.isfinite(grace) and grace >= 0):
        raise invalid_input(f"expected a grace period >= 0 seconds, found {grace}")
    if dir_fd is None:
        fd = open_launch_dir(launch)
        try:
            return run_launch(
                launch,
                command,
                grace=grace,
                say=say,
                clock=clock,
                supervisor=supervisor,
                dir_fd=fd,
                certifier=certifier,
            )
        finally:
            os.close(fd)
    if certifier is None:
        certifier = sealed(load_manager_key(), launch, dir_fd)
    server = EnrollServer(
        path=launch.enroll_socket,
        trust_file=launch.trust_file,
        issuer=launch.plan.issuer,
        membership=Membership(launch.supervisor.pid, launch.excluded),
        not_after=launch.ends_at,
        clock=clock,
        skew_s=CLOCK_SKEW_S,
        dir_fd=dir_fd,
        certifier=certifier,
    )
    server.listen()
    boss = supervisor if supervisor is not None else Supervisor(grace=grace, say=say)
    boss.enroll = server
    boss.membership = server.membership
    try:
        return boss.run(command, dict(launch.env))
    finally:
        server.close()


def supervise_launch(
    launch: Launch,
    command: Sequence[str],
    *,
    grace: float = 10.0,
    say: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.time,
    then_ignore: bool = False,
    repeat_window_s: float = 0.0,
    manager: ManagerKey | None = None,
) -> tuple[LaunchExit, list[str]]:
    """:func:`run_launch` then :func:`finish_launch`, with SIGINT, SIGTERM, SIGHUP and
    SIGQUIT handled from before the command starts until ``exit.json`` is written: a signal
    at any moment stops the tree (a second one at once), never ``ecpa run`` itself.

    Returns how the command ended and the problems met while finishing (said on ``say``).
    With ``then_ignore`` those signals stay ignored afterwards (``ecpa run``, which only
    reports and exits then, so a late signal cannot replace the command's exit status).
    ``repeat_window_s``: see :attr:`~ecpa.launcher.supervise.Supervisor.repeat_window_s`.
    ``manager``: the key that certifies each process key (default:
    :func:`~ecpa.launcher.manager.load_manager_key`'s).

    Raises:
        EcpaError: as :func:`run_launch`; as :func:`~ecpa.launcher.manager.load_manager_key`.
    """
    boss = Supervisor(grace=grace, say=say, repeat_window_s=repeat_window_s)
    key = load_manager_key() if manager is None else manager
    fd = open_launch_dir(launch)  # one directory, from start to end, whatever its name
    certifier = sealed(key, launch, fd)
    try:
        with boss.handlers(then_ignore=then_ignore):
            result = run_launch(
                launch,
                command,
                grace=grace,
                say=say,
                clock=clock,
                supervisor=boss,
                dir_fd=fd,
                certifier=certifier,
            )
            problems: list[str] = []
            try:
                finish_launch(
                    launch, ended_at=int(clock()), result=result, dir_fd=fd, certifier=certifier
                )
            except EcpaError as exc:
                problems.append(exc.detail)
                say(f"{exc.code.value}: {exc.detail}")
            if moved_away(launch, fd):
                problems.append(f"the launch directory was moved away from {launch.directory}")
                say(f"{problems[-1]}: trust.json and exit.json were written in it, wherever it is")
    finally:
        os.close(fd)
    return result, problems
