"""Running ``ecpa serve``: the address to listen on (loopback unless a token is given), the
token file (read like a key: a regular file of this user, mode 0600), and uvicorn with its
limits (connections, header size, keep-alive), over a socket bound here so that the
address actually bound (port 0: any free port) is said before the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ecpa._files import read_private
from ecpa.errors import ErrorCode, invalid_input
from ecpa.serve.app import create_app, prerender
from ecpa.serve.board import Board, Sources
from ecpa.serve.judges import MAX_JUDGES
from ecpa.serve.metrics import Metrics

__all__ = [
    "DEFAULT_LISTEN",
    "Listen",
    "ServeOptions",
    "bind",
    "is_loopback",
    "parse_listen",
    "read_token",
    "serve",
    "serve_options",
    "uvicorn_config",
]

DEFAULT_LISTEN = "127.0.0.1:9464"
#: Bytes of a token file read at most; a token of fewer characters is refused.
_MAX_TOKEN_FILE = 4096
_MIN_TOKEN = 16
#: Seconds a client has to send a whole request head, from its connection or the end of
#: its previous answer.
HEAD_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` or ``[V6]:PORT`` (port 0: any free port).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what was expected and found.
    """
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise invalid_input(f"expected --listen HOST:PORT (port 0 to 65535), found {text!r}")
    return Listen(host, int(port))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``); a name is not resolved."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> bytes:
    """The bearer token in ``path``: a regular file of this user that neither group nor
    others may read (or root's, readable by a group of ours and nobody else: a Kubernetes
    Secret mounted with ``fsGroup``), reached through no symlink that
    :func:`~ecpa._files.safe_target` refuses, holding one printable token of at least 16
    characters (a final newline is dropped).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the file and what was wrong (never the token).
    """
    data = read_private(path, _MAX_TOKEN_FILE, ErrorCode.INVALID_INPUT, "token file")
    token = data.rstrip(b"\r\n")
    if len(token) < _MIN_TOKEN or not all(0x21 <= b <= 0x7E for b in token):
        raise invalid_input(
            f"expected one token of at least {_MIN_TOKEN} printable characters (no spaces) "
            f"in {path}, found {len(token)} bytes that are not such a token"
        )
    return token


@dataclass(frozen=True)
class ServeOptions:
    sources: Sources
    listen: Listen
    token: bytes | None
    interval: float
    stale_after: float
    retention_s: float
    #: ``stale_after`` was not given: allow an interval and two refresh durations too (Board.limit).
    adaptive: bool = False
    #: Largest concurrent connections; more get 503 at once.
    max_connections: int = 64
    #: Judge in processes of their own (Board's ``apart``), not in the serving interpreter.
    apart: bool = True
    #: How many judging processes, each judging its part of the launches.
    judges: int = 1


def serve_options(
    sources: Sources,
    *,
    listen: str,
    token_file: Path | None,
    interval: float,
    stale_after: float | None,
    retention_s: float,
    judges: int = 1,
) -> ServeOptions:
    """The options of ``ecpa serve``, checked (docs/serve.md): ``stale_after`` None is the
    adaptive default; beyond loopback a token file is required.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the option, what was expected and found.
    """
    if not 1 <= sources.limit <= 1000:
        raise invalid_input(f"expected --limit within [1, 1000], found {sources.limit}")
    for directory in sources.evidence_dirs:
        if not directory.is_dir():
            raise invalid_input(f"expected an evidence directory at {directory}, found none")
    if not (math.isfinite(interval) and 0.2 <= interval <= 3600):
        raise invalid_input(f"expected --interval within [0.2, 3600] seconds, found {interval}")
    stale = max(10.0, 3 * interval) if stale_after is None else stale_after
    if not (math.isfinite(stale) and interval < stale <= 86400):
        raise invalid_input(
            f"expected --stale-after within ({interval}, 86400] seconds, found {stale}"
        )
    if not (math.isfinite(retention_s) and 0 <= retention_s <= 366 * 86400):
        raise invalid_input(
            f"expected --retention within [0, 31622400] seconds, found {retention_s}"
        )
    if not 0 <= judges <= MAX_JUDGES:
        raise invalid_input(
            f"expected --judges within [1, {MAX_JUDGES}] (0: one per CPU), found {judges}"
        )
    count = judges or min(usable_cpus(), MAX_JUDGES)
    address = parse_listen(listen)
    if token_file is None and not is_loopback(address.host):
        raise invalid_input(
            f"expected --token-file FILE to listen on {address.host}, beyond loopback "
            "(without a token, listen on 127.0.0.1 or ::1)"
        )
    token = None if token_file is None else read_token(token_file)
    return ServeOptions(
        sources,
        address,
        token,
        interval=interval,
        stale_after=stale,
        retention_s=retention_s,
        adaptive=stale_after is None,
        judges=count,
    )


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container's cpuset sets it), or
    the machine's where affinity is not known."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def bind(listen: Listen) -> socket.socket:
    """A listening socket on ``listen``. Its connections send each write at once
    (TCP_NODELAY, inherited from it): a response's headers and body are two writes, and
    with Nagle's rule the second waited for the client's delayed ACK, 40 ms per keep-alive
    request.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the address and why it cannot be bound.
    """
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((listen.host, listen.port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise invalid_input(
            f"expected to listen on {listen.host}:{listen.port}, found: {exc.strerror or exc}"
        ) from None
    sock.set_inheritable(True)
    return sock


def _launches(count: int) -> str:
    return f"{count} launch" if count == 1 else f"{count} launches"


class _Server(uvicorn.Server):
    """uvicorn's server, stopping on SIGINT or SIGTERM without raising the signal again
    afterwards (as uvicorn does): ``ecpa serve`` then exits 0 (docs/serve.md)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


#: The largest request head taken, however it arrives (docs/serve.md, "Limits").
MAX_HEAD_BYTES = 16 * 1024
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)


def _guarded(head_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11) with the limits of ``ecpa serve``:

    - a connection whose client has not sent a whole request head within ``head_timeout_s``
      of connecting or of its previous answer is closed (a client trickling header bytes
      held its connection for as long as it liked, and 64 of them shut out everyone);
    - a request head of more than :data:`MAX_HEAD_BYTES`, counted as it arrives whether in
      one write or many, gets 431 and the connection is closed (h11 bounded only a head
      still incomplete: a whole 20 KiB head in one write was answered);
    - the first ``max_connections`` connections open at once are served; only those beyond
      get 503 (uvicorn judged each request by every connection open then, so 70 connections
      at once got 503 all, and its cap was one less than asked)."""
    admitted = [0]  # this server's connections within the cap, open now

    class Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _armed_for: object = None
        _counted = False
        _head = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._counted = admitted[0] < max_connections
            admitted[0] += self._counted
            # uvicorn answers 503 to each request of a connection whose limit is 0.
            self.limit_concurrency = None if self._counted else 0
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:  # a head is arriving
                self._head += len(data)
                if self._head > MAX_HEAD_BYTES:
                    if not self.transport.is_closing():
                        self.transport.write(_TOO_LARGE)
                        self.transport.close()
                    return
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._head = 0
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            if self._counted:
                admitted[0] -= 1
                self._counted = False
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._armed_for = self.cycle  # a new request head makes a new cycle
            self._deadline = self.loop.call_later(head_timeout_s, self._too_slow)

        def _too_slow(self) -> None:
            if self.cycle is self._armed_for and not self.transport.is_closing():
                self.transport.close()

    return Protocol


def uvicorn_config(
    app: Any, *, max_connections: int = 64, head_timeout_s: float = HEAD_TIMEOUT_S
) -> uvicorn.Config:
    """uvicorn's configuration for ``ecpa serve`` (docs/serve.md, "Limits")."""
    return uvicorn.Config(
        app,
        http=_guarded(head_timeout_s, max_connections),
        log_level="warning",
        access_log=False,  # a line per request is the proxy's job; none ever holds a header
        server_header=False,
        proxy_headers=False,
        limit_concurrency=None,  # the protocol's own cap, per connection (see _guarded)
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        lifespan="off",
    )


def serve(options: ServeOptions, *, say: Callable[[str], None] = print) -> None:
    """Judge every launch once, bind, say where, and serve until SIGINT or SIGTERM."""
    page_refresh = max(2, round(options.interval * 2))
    metrics = Metrics(options.retention_s)
    board = Board(
        options.sources,
        interval=options.interval,
        stale_after=options.stale_after,
        adaptive=options.adaptive,
        publish=lambda snap: prerender(snap, metrics, page_refresh_s=page_refresh),
        apart=options.apart,
        judges=options.judges if options.apart else 1,
    )
    try:
        board.refresh()
        sock = bind(options.listen)
        try:
            host, port = sock.getsockname()[:2]
            bound = Listen(host, port)
            app = create_app(board, metrics, token=options.token, page_refresh_s=page_refresh)
            config = uvicorn_config(app, max_connections=options.max_connections)
            server = _Server(config)
            sources = ", ".join(options.sources.names())
            say(
                f"ecpa serve: listening on {bound.url()} "
                f"({_launches(len(board.view()[0].entries))} in {sources}; refresh every "
                f"{options.interval:g} s{'; bearer token required' if options.token else ''})"
            )
            sys.stdout.flush()
            board.start()
            server.run(sockets=[sock])
        finally:
            sock.close()
    finally:
        board.stop()  # the refresher thread and the judging process
