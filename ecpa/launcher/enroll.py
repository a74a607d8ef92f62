"""``ecpa run``'s side of process keys (RUNTIME.md "Process keys"): the enrollment socket.

The supervisor listens on ``enroll.sock`` (mode 0600, in the 0700 launch directory) and
serves it from its own loop, non-blocking: a slow or silent peer costs nothing but a slot
in :attr:`EnrollServer.pending` until its deadline. For each request it checks, in order:

1. the peer's credentials (``SO_PEERCRED``): the uid running ``ecpa run``;
2. the pid the request claims is the peer's own;
3. that process, read from ``/proc`` now, is the identity claimed (host, boot id, start
   ticks): a process cannot enroll a key in another's name;
4. the peer belongs to the launch: it descends from ``ecpa run`` (a child subreaper: its tree
   stays its own), not through a child ``ecpa run`` had before its command started;
5. the process has no key yet (one key, one slot per process identity); the very same
   request again (a retry after a slow answer) gets the same answer;
6. the key loads by every rule of PROFILE §5 (no small-order key).

Then the manager certifies the key (:class:`~ecpa.launcher.manager.Certifier`: a certificate
in ``enrollments.jsonl``, synced), and adds it to ``trust.json`` under the store's lock, with
``kid`` ``<role>.<ordinal>-<pid>-<start_ticks>``, subject ``host-runtime`` and a window from
now to the launch's end, and answers with the kid: in that order, so that a reader never
finds in ``trust.json`` a key of this launch without its certificate. A refusal answers with
the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, ErrorCode
from ecpa.launcher.manager import Certifier
from ecpa.profile.keys import VerifyKey
from ecpa.runtime import (
    LAUNCH_SUBJECT,
    MAX_MESSAGE,
    PROC,
    Enrollment,
    Membership,
    ProcessIdentity,
    Request,
    kid_for,
    parse_request,
    read_identity,
    reply_bytes,
    update_trust_file,
)

__all__ = ["EnrollServer", "Enrolled"]

_REQUEST_TIMEOUT_S = 2.0
_MAX_PENDING = 64
_MAX_REFUSED = 100
_PEERCRED = struct.Struct("3i")
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux 6.5
#: Enrollment waits at most this long for the trust store's lock: the supervisor's loop
#: must go on (signals, reaping); a busy store is refused and the observer tries again.
_LOCK_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class Enrolled:
    """One enrolled process key."""

    kid: str
    identity: ProcessIdentity
    request: Request


@dataclass
class _Pending:
    conn: socket.socket
    pid: int
    uid: int
    deadline: float
    pidfd: int | None = None
    data: bytes = b""


def _peer_pidfd(conn: socket.socket) -> int | None:
    """The kernel's pidfd of the process that connected, or None where unsupported."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, 4)
    except OSError:
        return None
    return int.from_bytes(raw, "little", signed=True)


def _pidfd_pid(pidfd: int) -> int | None:
    """The pid the pidfd names while its process lives, else None (exited)."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        return None
    return None


@dataclass
class EnrollServer:
    """The enrollment socket of one launch, served by :meth:`serve` from the caller's loop."""

    path: Path
    trust_file: Path
    issuer: str
    #: Who belongs to the launch (RUNTIME.md "Membership"): the supervisor's tree, less the
    #: children it had before the command.
    membership: Membership
    not_after: int
    clock: Callable[[], float] = time.time
    skew_s: int = 5
    proc_root: Path = PROC
    host: str | None = None
    #: The launch directory, open: ``trust.json`` is written and the socket removed in it,
    #: wherever it is moved meanwhile (None: by their paths).
    dir_fd: int | None = None
    #: Who certifies each key enrolled (None: nobody; then no reader trusts the keys).
    certifier: Certifier | None = None
    enrolled: dict[ProcessIdentity, Enrolled] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    pending: dict[int, _Pending] = field(default_factory=dict)
    _sock: socket.socket | None = None

    def listen(self) -> None:
        """Bind and listen at :attr:`path` with mode 0600 from the first moment.

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when the socket cannot be made.
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old = os.umask(0o177)
        # A socket is bound by a path; through /proc's link to the directory open as
        # dir_fd, that path leads to the launch's own directory wherever it is now.
        where = (
            self.path if self.dir_fd is None else f"/proc/self/fd/{self.dir_fd}/{self.path.name}"
        )
        try:
            sock.bind(str(where))
            os.chmod(where, 0o600)
            sock.listen(_MAX_PENDING)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise EcpaError(
                ErrorCode.INVALID_INPUT,
                f"expected to listen on {self.path}, found: {exc.strerror or exc}",
            ) from None
        finally:
            os.umask(old)
        self._sock = sock

    def fds(self) -> list[int]:
        """The descriptors to wait on: the listening socket and each pending peer."""
        if self._sock is None:
            return []
        return [self._sock.fileno(), *self.pending]

    def _evict_oldest(self) -> None:
        """Room for a new peer: the oldest pending one goes (a flood of silent connections
        must not lock real schedulers out, nor make the loop spin on a full queue)."""
        oldest = min(self.pending.values(), key=lambda peer: peer.deadline)
        self._finish(oldest, error="too many pending enrollments: try again")

    def serve(self, ready: list[int]) -> None:
        """Accept and answer what ``ready`` (from ``select``) says can be read; drop peers
        past their deadline. Raises nothing."""
        if self._sock is None:
            return
        if self._sock.fileno() in ready:
            self._accept()
        for fd in [fd for fd in ready if fd in self.pending]:
            self._read(self.pending[fd])
        now = time.monotonic()
        for peer in list(self.pending.values()):
            if now >= peer.deadline:
                self._finish(peer, error="no complete request in time")

    def _accept(self) -> None:
        assert self._sock is not None
        for _ in range(_MAX_PENDING):
            if len(self.pending) >= _MAX_PENDING:
                self._evict_oldest()
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            conn.setblocking(False)
            try:
                raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
                pid, uid, _gid = _PEERCRED.unpack(raw)
            except OSError:
                conn.close()
                continue
            deadline = time.monotonic() + _REQUEST_TIMEOUT_S
            self.pending[conn.fileno()] = _Pending(conn, pid, uid, deadline, _peer_pidfd(conn))

    def _read(self, peer: _Pending) -> None:
        try:
            chunk = peer.conn.recv(MAX_MESSAGE + 1 - len(peer.data))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        peer.data += chunk
        if len(peer.data) > MAX_MESSAGE:
            self._finish(peer, error=f"expected a request of at most {MAX_MESSAGE} bytes")
        elif peer.data.endswith(b"\n") or not chunk:
            self._answer(peer)

    def _answer(self, peer: _Pending) -> None:
        try:
            kid = self._enroll(peer)
        except EcpaError as exc:
            if len(self.refused) < _MAX_REFUSED:
                self.refused.append(f"pid {peer.pid}: {exc.detail}")
            self._finish(peer, error=exc.detail)
        else:
            self._finish(peer, kid=kid)

    def _finish(self, peer: _Pending, *, kid: str | None = None, error: str | None = None) -> None:
        self.pending.pop(peer.conn.fileno(), None)
        if peer.pidfd is not None:
            os.close(peer.pidfd)
            peer.pidfd = None
        data = reply_bytes(kid=kid, error=error)
        with contextlib.suppress(OSError):
            peer.conn.setblocking(True)
            peer.conn.settimeout(0.5)
            while data:  # MSG_NOSIGNAL: a peer gone already must not SIGPIPE ecpa run
                data = data[peer.conn.send(data, socket.MSG_NOSIGNAL) :]
        peer.conn.close()

    def _still_the_peer(self, peer: _Pending) -> None:
        if peer.pidfd is None:  # a kernel without SO_PEERPIDFD: the pid alone, as before
            return
        if _pidfd_pid(peer.pidfd) != peer.pid:
            raise self._refuse(
                f"the process that connected (pid {peer.pid}) has exited: a pid may not be "
                "enrolled for whoever reuses it"
            )

    def _refuse(self, detail: str) -> EcpaError:
        return EcpaError(ErrorCode.INVALID_INPUT, f"enrollment refused: {detail}")

    def _enroll(self, peer: _Pending) -> str:
        if peer.uid != os.geteuid():  # step 1
            raise self._refuse(f"expected a peer of uid {os.geteuid()}, found uid {peer.uid}")
        request = parse_request(peer.data)
        claimed = request.identity
        if claimed.pid != peer.pid:  # step 2
            raise self._refuse(f"the request claims pid {claimed.pid}, the peer is pid {peer.pid}")
        self._still_the_peer(peer)
        try:  # step 3
            actual = read_identity(peer.pid, proc_root=self.proc_root, host=self.host)
        except EcpaError as exc:
            raise self._refuse(f"cannot read the peer's identity: {exc.detail}") from None
        self._still_the_peer(peer)  # alive throughout: its pid was not reused meanwhile
        if actual != claimed:
            raise self._refuse(
                f"the request claims {claimed.start_identity} on {claimed.host!r}, the peer is "
                f"{actual.start_identity} on {actual.host!r}"
            )
        if not self.membership.includes(peer.pid, proc_root=self.proc_root):  # 4
            boss = self.membership.supervisor
            raise self._refuse(
                f"pid {peer.pid} is not a process of the launch: not a descendant of ecpa run "
                f"(pid {boss}), or one through a child ecpa run had before its command started"
            )
        known = self.enrolled.get(actual)
        if known is not None:  # step 5
            if known.request == request:
                return known.kid  # the same request again: a retry after a slow answer
            raise self._refuse(f"pid {peer.pid} already holds key {known.kid!r} (one per process)")
        kid = kid_for(request.slot, actual)
        now = int(self.clock())
        try:  # step 6, before the key is certified
            VerifyKey.from_b64(request.public_key_b64)
        except EcpaError as exc:
            raise self._refuse(exc.detail) from None
        window = (max(0, now - self.skew_s), max(self.not_after, now))
        entry = {
            "issuer": self.issuer,
            "kid": kid,
            "public_key_b64": request.public_key_b64,
            "subjects": [LAUNCH_SUBJECT],
            "enabled": True,
            "not_before": window[0],
            "not_after": window[1],
        }

        def add(doc: dict[str, Any]) -> dict[str, Any]:
            keys = doc.get("keys")
            if not isinstance(keys, list):
                raise self._refuse("the launch's trust store has no 'keys' array")
            doc["keys"] = [k for k in keys if not (isinstance(k, dict) and k.get("kid") == kid)]
            doc["keys"].append(entry)
            return doc

        if self.certifier is not None:
            enrollment = Enrollment(
                0,
                "enrolled",
                self.issuer,
                kid,
                request.public_key_b64,
                (LAUNCH_SUBJECT,),
                request.slot,
                actual,
                *window,
            )
            try:
                self.certifier.certify(enrollment, now=now)
            except EcpaError as exc:
                raise self._refuse(f"the key could not be certified: {exc.detail}") from None
        try:  # the store checks the entry by every rule before it is written
            update_trust_file(self.trust_file, add, timeout=_LOCK_TIMEOUT_S, dir_fd=self.dir_fd)
        except EcpaError as exc:
            raise self._refuse(exc.detail) from None
        self.enrolled[actual] = Enrolled(kid, actual, request)
        return kid

    def close(self) -> None:
        """Stop listening: answer no one more, remove the socket file. Idempotent."""
        for peer in list(self.pending.values()):
            self._finish(peer, error="the launch is ending")
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
            with contextlib.suppress(OSError):
                if self.dir_fd is None:
                    os.unlink(self.path)
                else:
                    os.unlink(self.path.name, dir_fd=self.dir_fd)
