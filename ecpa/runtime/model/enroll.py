"""Process keys (RUNTIME.md "Process keys", 0.2): names and the enrollment exchange.

A scheduler process makes its own Ed25519 key in memory and asks ``ecpa run`` to enroll its
public half, over the launch's Unix socket (``ECPA_ENROLL_SOCKET``), for its slot and its
identity. ``ecpa run`` checks the peer (see :mod:`ecpa.launcher.enroll`) and answers with the
key id it enrolled: ``<role>.<ordinal>-<pid>-<start_ticks>``, which names exactly one process.
Everything that process writes is named after it: its log file ``<kid>.jsonl`` and its
nonces ``<challenge>:<role>.<ordinal>:<pid>.<start_ticks>:<seq>``.

One exchange is one line each way, compact JSON, at most :data:`MAX_MESSAGE` bytes:
request ``{"schema": "ecpa-enroll/0.2", "public_key_b64", "role", "ordinal", "process":
{"host", "pid", "start_ticks", "boot_id"}}``; reply ``{"schema": "ecpa-enroll-reply/0.2",
"kid"}`` or ``{"schema": ..., "error"}``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ecpa.errors import EcpaError, invalid_input
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime.model.launch import Slot
from ecpa.runtime.model.process import ProcessIdentity

__all__ = [
    "ENROLL_SCHEMA",
    "LOG_NAME",
    "LOG_SUFFIX",
    "MAX_MESSAGE",
    "REPLY_SCHEMA",
    "Request",
    "enroll",
    "kid_for",
    "kid_of_log",
    "log_name",
    "nonce_for",
    "parse_kid",
    "parse_request",
    "reply_bytes",
    "request_bytes",
]

ENROLL_SCHEMA = "ecpa-enroll/0.2"
REPLY_SCHEMA = "ecpa-enroll-reply/0.2"
MAX_MESSAGE = 4096
_KID = re.compile(r"([a-z][a-z0-9_-]{0,63})\.([0-9]{1,5})-([0-9]{1,20})-([0-9]{1,20})")
#: A process's evidence log is its key id and this suffix.
LOG_SUFFIX = ".jsonl"
#: What a process log is called: ``<role>.<ordinal>-<pid>-<ticks>.jsonl`` (its key id).
LOG_NAME = re.compile(_KID.pattern + re.escape(LOG_SUFFIX))


def kid_for(slot: Slot, identity: ProcessIdentity) -> str:
    """The key id of the process ``identity`` in ``slot``: ``<role>.<ordinal>-<pid>-<ticks>``."""
    return f"{slot.name}-{identity.pid}-{identity.start_ticks}"


def parse_kid(kid: str) -> tuple[Slot, int, int] | None:
    """The slot, pid and start ticks a process key id names, or None for another shape
    (a 0.1 launch key, say)."""
    match = _KID.fullmatch(kid)
    if match is None:
        return None
    ordinal = int(match.group(2))
    if ordinal > 65535:
        return None
    return Slot(match.group(1), ordinal), int(match.group(3)), int(match.group(4))


def log_name(kid: str) -> str:
    """The evidence log file of the process a key id names: ``<kid>.jsonl``."""
    return f"{kid}{LOG_SUFFIX}"


def kid_of_log(name: str) -> str:
    """The key id a log file's name carries: the name without its ``.jsonl`` (a name without
    it is taken as it is)."""
    return name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else name


def nonce_for(challenge: str, slot: Slot, identity: ProcessIdentity, seq: int) -> str:
    """``<challenge>:<role>.<ordinal>:<pid>.<start_ticks>:<seq>`` (RUNTIME.md "Slots")."""
    return f"{challenge}:{slot.name}:{identity.pid}.{identity.start_ticks}:{seq}"


@dataclass(frozen=True)
class Request:
    """What a process asks to have enrolled: its public key, for its slot and identity."""

    public_key_b64: str
    slot: Slot
    identity: ProcessIdentity


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


def request_bytes(request: Request) -> bytes:
    """The request line for ``request``."""
    ident = request.identity
    return _line(
        {
            "schema": ENROLL_SCHEMA,
            "public_key_b64": request.public_key_b64,
            "role": request.slot.role,
            "ordinal": request.slot.ordinal,
            "process": {
                "host": ident.host,
                "pid": ident.pid,
                "start_ticks": ident.start_ticks,
                "boot_id": ident.boot_id,
            },
        }
    )


def _str(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise invalid_input(
            f"enrollment request: expected {name!r} as a non-empty string, found {value!r}"
        )
    return value


def _int(obj: dict[str, Any], name: str) -> int:
    value = obj.get(name)
    if type(value) is not int or value < 0:
        raise invalid_input(
            f"enrollment request: expected {name!r} as an integer >= 0, found {value!r}"
        )
    return value


def parse_request(data: bytes) -> Request:
    """A request line, strictly (strict JSON, exactly the members above).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what is wrong.
    """
    if len(data) > MAX_MESSAGE:
        raise invalid_input(f"enrollment request: expected at most {MAX_MESSAGE} bytes, found more")
    try:
        obj = parse_object(data.rstrip(b"\n"), what="enrollment request")
    except EcpaError as exc:
        raise invalid_input(f"{exc.code.value}: {exc.detail}") from None
    members = {"schema", "public_key_b64", "role", "ordinal", "process"}
    if set(obj) != members or obj["schema"] != ENROLL_SCHEMA:
        raise invalid_input(
            f"enrollment request: expected schema {ENROLL_SCHEMA!r} with members "
            f"{sorted(members)}, found {sorted(obj)}"
        )
    proc = obj["process"]
    if not isinstance(proc, dict) or set(proc) != {"host", "pid", "start_ticks", "boot_id"}:
        raise invalid_input(
            "enrollment request: expected process {host, pid, start_ticks, boot_id}"
        )
    identity = ProcessIdentity(
        _str(proc, "host"), _int(proc, "pid"), _int(proc, "start_ticks"), _str(proc, "boot_id")
    )
    slot = Slot(_str(obj, "role"), _int(obj, "ordinal"))
    return Request(_str(obj, "public_key_b64"), slot, identity)


def reply_bytes(*, kid: str | None = None, error: str | None = None) -> bytes:
    """The reply line: the enrolled key id, or why the request was refused."""
    if kid is not None:
        return _line({"schema": REPLY_SCHEMA, "kid": kid})
    return _line({"schema": REPLY_SCHEMA, "error": error or "refused"})


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no reply in time")
        sock.settimeout(remaining)
        chunk = sock.recv(MAX_MESSAGE + 1 - len(data))
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_MESSAGE:
            raise invalid_input(
                f"enrollment reply: expected at most {MAX_MESSAGE} bytes, found more"
            )
    return data


#: The longest path a Unix socket address holds (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH = 107


def enroll(path: str | Path, request: Request, *, timeout: float = 5.0) -> str:
    """Ask the supervisor listening at ``path`` to enroll ``request``; return the key id.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when the socket cannot be reached within
            ``timeout`` seconds, or the supervisor refused (its reason is in the detail).
    """
    deadline = time.monotonic() + timeout
    directory: int | None = None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(timeout)
            where = str(path)
            if len(os.fsencode(where)) > MAX_SOCKET_PATH:
                # Longer than a socket address holds (a launch deep in a tree): connect
                # through /proc's link to the directory, as ecpa run binds it.
                directory = os.open(Path(path).parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                where = f"/proc/self/fd/{directory}/{Path(path).name}"
            sock.connect(where)
            sock.sendall(request_bytes(request))
            data = _read_line(sock, deadline)
    except (OSError, TimeoutError) as exc:
        raise invalid_input(
            f"expected the enrollment socket {path} to answer, found: {exc}"
        ) from None
    finally:
        if directory is not None:
            os.close(directory)
    try:
        reply = parse_object(data.rstrip(b"\n"), what="enrollment reply")
    except EcpaError as exc:
        raise invalid_input(f"enrollment reply: {exc.detail}") from None
    kid = reply.get("kid")
    if reply.get("schema") != REPLY_SCHEMA or not isinstance(kid, str):
        raise invalid_input(f"enrollment refused by ecpa run: {reply.get('error')!r}")
    expected = kid_for(request.slot, request.identity)
    if kid != expected:
        raise invalid_input(f"enrollment reply: expected kid {expected!r}, found {kid!r}")
    return kid
