"""Process identity, liveness and the launch binding (RUNTIME.md).

A pid alone names a process only until it exits: the kernel reuses pids, and a reboot
reuses all of them. A process is named here by (host, boot id, pid, start ticks): the start
time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``) differs for a reused pid,
and the boot id differs after a reboot. ``proc_root`` is a parameter so tests can fake
``/proc``: pid reuse, reboots, odd command names.
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, invalid_input

__all__ = [
    "BINDING_ENV_NAMES",
    "BINDING_FIELDS",
    "ENV_NAMES",
    "ENV_NAMES_02",
    "PROC",
    "SLOT_ENV_NAMES",
    "LaunchEnvironment",
    "Liveness",
    "ProcEntry",
    "ProcessIdentity",
    "check_alive",
    "children_of",
    "descends_from",
    "launch_from_env",
    "make_undumpable",
    "parent_pid",
    "proc_table",
    "read_boot_id",
    "read_identity",
]

PROC = Path("/proc")
# ASCII digits only (``\d`` would take any script's digits), at most 20 of them: a pid and
# start ticks fit in 64 bits, and int() refuses more than 4300 digits with a ValueError.
_START_IDENTITY = re.compile(r"pid:([0-9]{1,20}):start_ticks:([0-9]{1,20}):boot:([0-9A-Za-z-]+)")


PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_LIBC: ctypes.CDLL | bool | None = False  # False: not looked up yet


def prctl(option: int, value: int = 0) -> int | None:
    """``prctl(option, value, 0, 0, 0)`` (Linux): its result (-1 on an error), or None where
    there is no C library to call (the one home of this call: supervision and the observer
    use it). Never raises."""
    global _LIBC  # looked up once, on first use
    if _LIBC is False:
        try:  # the interpreter's own symbols, libc's among them (no ldconfig run)
            _LIBC = ctypes.CDLL(None, use_errno=True)
            _LIBC.prctl  # noqa: B018 - resolves the symbol now, or raises
        except (OSError, AttributeError):
            _LIBC = None
    if not isinstance(_LIBC, ctypes.CDLL):
        return None
    result: int = _LIBC.prctl(option, value, 0, 0, 0)
    return result


def make_undumpable() -> bool:
    """Make this process non-dumpable (``PR_SET_DUMPABLE`` 0): no core dump, and another
    process of the same user can no longer read its memory (``/proc/<pid>/mem``) or ptrace
    it; only a process with ``CAP_SYS_PTRACE`` (root) can (RUNTIME.md "Keys in memory").
    True when the flag is 0 afterwards. Never raises."""
    prctl(PR_SET_DUMPABLE, 0)
    return prctl(PR_GET_DUMPABLE) == 0


@dataclass(frozen=True)
class ProcessIdentity:
    """Who a process is, across pid reuse and reboots."""

    host: str
    pid: int
    start_ticks: int
    boot_id: str

    @property
    def start_identity(self) -> str:
        """The statement's ``process.start_identity``: ``pid:P:start_ticks:T:boot:B``."""
        return f"pid:{self.pid}:start_ticks:{self.start_ticks}:boot:{self.boot_id}"

    @classmethod
    def parse(cls, host: str, start_identity: str) -> ProcessIdentity:
        """Read back a statement's ``process.host`` and ``process.start_identity``.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when ``start_identity`` has another shape.
        """
        match = _START_IDENTITY.fullmatch(start_identity)
        if match is None:
            raise invalid_input(
                "expected start_identity 'pid:<pid>:start_ticks:<ticks>:boot:<boot id>', "
                f"found {start_identity!r}"
            )
        return cls(host, int(match.group(1)), int(match.group(2)), match.group(3))


def read_boot_id(proc_root: Path = PROC) -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when it cannot be read.
    """
    path = proc_root / "sys" / "kernel" / "random" / "boot_id"
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid_input(f"expected a boot id at {path}, found: {exc}") from None


def _stat_fields(pid: int, proc_root: Path) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 first), or None
    when there is no such process."""
    try:
        data = (proc_root / str(pid) / "stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except OSError as exc:
        raise invalid_input(
            f"expected a readable /proc/{pid}/stat, found: {exc.strerror}"
        ) from None
    end = data.rfind(b")")
    fields = data[end + 1 :].split()
    if end < 0 or len(fields) < 20 or not all(f.isdigit() and len(f) <= 20 for f in fields[1:2]):
        raise invalid_input(
            f"expected /proc/{pid}/stat in the kernel's format, found {data[:80]!r}"
        )
    return fields


@dataclass(frozen=True)
class ProcEntry:
    """One process as its ``/proc/<pid>/stat`` shows it."""

    ppid: int
    pgid: int
    #: The state letter (``R``, ``S``, ``Z`` for a zombie, ...).
    state: str
    start_ticks: int

    @property
    def live(self) -> bool:
        """Not a zombie (nor dead): something to signal, not only to reap."""
        return self.state not in ("Z", "X")


def proc_table(proc_root: Path = PROC) -> dict[int, ProcEntry]:
    """Every process ``proc_root`` lists now, each from its ``stat``. Never raises: a process
    that exited meanwhile, or an entry out of the kernel's format, is left out."""
    try:
        names = os.listdir(proc_root)
    except OSError:
        return {}
    table: dict[int, ProcEntry] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            fields = _stat_fields(int(name), proc_root)
        except EcpaError:
            continue
        if fields is None or not (fields[2].isdigit() and fields[19].isdigit()):
            continue
        state = fields[0].decode("ascii", "replace")
        table[int(name)] = ProcEntry(int(fields[1]), int(fields[2]), state, int(fields[19]))
    return table


def children_of(table: dict[int, ProcEntry]) -> dict[int, list[int]]:
    """Each pid's children in ``table`` (zombies included)."""
    children: dict[int, list[int]] = {}
    for pid, entry in table.items():
        children.setdefault(entry.ppid, []).append(pid)
    return children


def parent_pid(pid: int, *, proc_root: Path = PROC) -> int | None:
    """The parent of process ``pid`` (field 4 of ``/proc/<pid>/stat``), or None when there
    is no such process.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when ``/proc`` cannot be read.
    """
    fields = _stat_fields(pid, proc_root)
    return None if fields is None else int(fields[1])


#: Longer parent chains than this are not followed (a loop in a faked /proc, say).
_MAX_DEPTH = 4096


def descends_from(pid: int, ancestor: int, *, proc_root: Path = PROC) -> bool:
    """Whether process ``pid`` is ``ancestor`` or one of its descendants now: its parent
    chain, read from ``/proc``, reaches ``ancestor`` before pid 1 or 0. A child subreaper
    (``ecpa run``) stays the ancestor of every process of its tree, even through a
    ``setsid`` and a double fork, since orphans are reparented to it.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when ``/proc`` cannot be read.
    """
    current: int | None = pid
    for _ in range(_MAX_DEPTH):
        if current is None or current <= 0:
            return False
        if current == ancestor:
            return True
        if current == 1:
            return False
        current = parent_pid(current, proc_root=proc_root)
    return False


def _start_ticks(pid: int, proc_root: Path) -> int | None:
    """Field 22 of ``/proc/<pid>/stat``, or None when there is no such process or it is a
    zombie (state Z or X: it has exited and only waits to be reaped).

    The command name (field 2) is in parentheses and may itself hold spaces and ``)``, so
    the fields are counted from after the LAST ``)``: field 3 is the first one there.
    """
    fields = _stat_fields(pid, proc_root)
    if fields is None or fields[0] in (b"Z", b"X"):  # field 3, the state
        return None
    if not (fields[19].isdigit() and len(fields[19]) <= 20):
        raise invalid_input(
            f"expected /proc/{pid}/stat in the kernel's format, found {fields[19]!r}"
        )
    return int(fields[19])  # field 22 is the 20th after the command name


def read_identity(
    pid: int | None = None, *, proc_root: Path = PROC, host: str | None = None
) -> ProcessIdentity:
    """The identity of process ``pid`` (default: this process) on this host, now.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when there is no such process or /proc is unreadable.
    """
    pid = os.getpid() if pid is None else pid
    ticks = _start_ticks(pid, proc_root)
    if ticks is None:
        raise invalid_input(f"expected a process {pid}, found none")
    return ProcessIdentity(host or socket.gethostname(), pid, ticks, read_boot_id(proc_root))


@dataclass(frozen=True)
class Liveness:
    """Whether the process a statement names is alive now, and why not if it is not."""

    alive: bool
    reason: str


def check_alive(
    identity: ProcessIdentity, *, proc_root: Path = PROC, host: str | None = None
) -> Liveness:
    """Is the very process ``identity`` names still running: same host, same boot, a process
    with that pid whose start ticks are unchanged (a reused pid is another process)."""
    here = host or socket.gethostname()
    if identity.host != here:
        return Liveness(False, f"process on host {identity.host!r}, not this host {here!r}")
    boot = read_boot_id(proc_root)
    if identity.boot_id != boot:
        return Liveness(False, f"process of boot {identity.boot_id}, the host rebooted ({boot})")
    ticks = _start_ticks(identity.pid, proc_root)
    if ticks is None:
        return Liveness(False, f"process not alive: no running process {identity.pid}")
    if ticks != identity.start_ticks:
        return Liveness(
            False,
            f"process not alive: pid {identity.pid} was reused (start ticks {ticks}, "
            f"expected {identity.start_ticks})",
        )
    return Liveness(True, f"process {identity.pid} alive since tick {ticks}")


#: The binding every launch sets (RUNTIME.md "Launch binding"), defined once: each
#: :class:`LaunchEnvironment` field with the variable that carries it. The manager writes
#: the environment from it and the observer reads it back by it.
BINDING_FIELDS = (
    ("plan_id", "ECPA_PLAN_ID"),
    ("launch_id", "ECPA_LAUNCH_ID"),
    ("challenge", "ECPA_CHALLENGE"),
    ("plugin_id", "ECPA_PLUGIN_ID"),
    ("artifact_digest", "ECPA_ARTIFACT_DIGEST"),
    ("issuer", "ECPA_ISSUER"),
    ("evidence_dir", "ECPA_EVIDENCE_DIR"),
    ("process_epoch", "ECPA_PROCESS_EPOCH"),
)
_COMMON_NAMES = tuple(name for _, name in BINDING_FIELDS)
#: The 0.1 launch binding: one launch key in a file.
ENV_NAMES = (*_COMMON_NAMES[:6], "ECPA_KID", "ECPA_SIGNING_KEY_FILE", *_COMMON_NAMES[6:])
#: The 0.2 launch binding: each process enrolls its own key through the supervisor's socket.
ENV_NAMES_02 = (*_COMMON_NAMES, "ECPA_ENROLL_SOCKET")
#: The slot a process fills when its host does not say (RUNTIME.md "Slots").
SLOT_ENV_NAMES = ("ECPA_PROCESS_ROLE", "ECPA_PROCESS_ORDINAL")
#: Every name of a launch binding, 0.1 and 0.2: a manager refuses to find any already set.
BINDING_ENV_NAMES = (*ENV_NAMES, "ECPA_ENROLL_SOCKET", *SLOT_ENV_NAMES)


@dataclass(frozen=True)
class LaunchEnvironment:
    """The launch binding as the observer reads it from its environment: a 0.2 launch has
    ``enroll_socket`` (and no key file), a 0.1 launch ``kid`` and ``signing_key_file``.
    ``role``/``ordinal`` are the fallback slot (``ECPA_PROCESS_ROLE``/``_ORDINAL``), or None."""

    plan_id: str
    launch_id: str
    challenge: str
    plugin_id: str
    artifact_digest: str
    issuer: str
    kid: str | None
    signing_key_file: Path | None
    evidence_dir: Path
    process_epoch: int
    enroll_socket: Path | None = None
    role: str | None = None
    ordinal: int | None = None

    @property
    def version(self) -> str:
        """``"0.2"`` with process keys (an enrollment socket), else ``"0.1"``."""
        return "0.2" if self.enroll_socket is not None else "0.1"


def _slot_from_env(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    role, ordinal = env.get("ECPA_PROCESS_ROLE") or None, env.get("ECPA_PROCESS_ORDINAL") or None
    if role is None and ordinal is None:
        return None, None
    if role is None or ordinal is None:
        raise invalid_input(f"expected both or neither of {list(SLOT_ENV_NAMES)}, found one")
    if not (ordinal.isascii() and ordinal.isdigit() and len(ordinal) <= 5):
        raise invalid_input(
            f"expected ECPA_PROCESS_ORDINAL as an integer in [0, 65535], found {ordinal!r}"
        )
    return role, int(ordinal)


def launch_from_env(env: Mapping[str, str]) -> LaunchEnvironment | None:
    """The launch binding from ``env`` (pass ``os.environ``), or None when none is set.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when it is partial or malformed, or mixes the 0.1
            key file with the 0.2 enrollment socket: the observer must then stay inactive,
            loudly, rather than sign for the wrong launch.
    """
    present = [name for name in (*BINDING_ENV_NAMES,) if env.get(name)]
    if not present:
        return None
    v02 = bool(env.get("ECPA_ENROLL_SOCKET"))
    if v02 and (env.get("ECPA_KID") or env.get("ECPA_SIGNING_KEY_FILE")):
        raise invalid_input(
            "expected ECPA_ENROLL_SOCKET (0.2) or ECPA_KID/ECPA_SIGNING_KEY_FILE (0.1), found both"
        )
    names = ENV_NAMES_02 if v02 else ENV_NAMES
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise invalid_input(f"expected the whole launch binding, found {missing} missing")
    epoch = env["ECPA_PROCESS_EPOCH"]
    if not (epoch.isascii() and epoch.isdigit() and len(epoch) <= 16 and int(epoch) < 2**53):
        raise invalid_input(
            f"expected ECPA_PROCESS_EPOCH as an integer in [0, 2**53-1], found {epoch!r}"
        )
    if len(env["ECPA_CHALLENGE"]) < 22:  # 128 bits as base64url is 22 characters
        raise invalid_input(
            "expected ECPA_CHALLENGE of at least 128 bits (22 base64url characters)"
        )
    role, ordinal = _slot_from_env(env)
    bound: dict[str, Any] = {field: env[name] for field, name in BINDING_FIELDS}
    return LaunchEnvironment(
        **{**bound, "evidence_dir": Path(bound["evidence_dir"]), "process_epoch": int(epoch)},
        kid=None if v02 else env["ECPA_KID"],
        signing_key_file=None if v02 else Path(env["ECPA_SIGNING_KEY_FILE"]),
        enroll_socket=Path(env["ECPA_ENROLL_SOCKET"]) if v02 else None,
        role=role,
        ordinal=ordinal,
    )
