"""The HTTP API of ``ecpa serve`` (docs/serve.md): FastAPI routes that read the board's newest
snapshot, behind a guard (:class:`Guard`, plain ASGI) that admits only ``GET`` and ``HEAD``
without a body, and, when a token is set, only requests bearing it (compared in constant
time). Nothing here derives, reads a file or builds a path: a launch id is looked up in the
snapshot after it is checked, and 404 is the answer to any id not there.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from ecpa.serve.board import VERSION, Board, Snapshot, dumps
from ecpa.serve.encoding import GzipPrefix, accepts_gzip, gzip_bytes
from ecpa.serve.metrics import CONTENT_TYPE, Metrics
from ecpa.serve.page import render_page

__all__ = ["Guard", "create_app", "prerender"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The longest launch id looked up (``check_launch_id``'s bound); a longer one, or one with
#: a control character, is "not found" before the snapshot is even asked.
MAX_LAUNCH_ID = 200
_OPEN_PATHS = frozenset({"/healthz"})  # probes carry no token; they learn nothing but "up"
_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
]


class Guard:
    """Plain ASGI in front of the app: 405 for any method but GET and HEAD, 413 for a request
    with a body, 401 without the bearer token (when one is set), and the security headers
    on every answer."""

    def __init__(self, app: ASGIApp, token: bytes | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        head = scope["method"] == "HEAD"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}  # HEAD: GET's headers, no body
            await send(message)

        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send_with_headers, 405, "only GET and HEAD", [(b"allow", b"GET, HEAD")])
        elif headers.get(b"content-length", b"0") not in (b"0", b"") or (
            b"transfer-encoding" in headers
        ):
            await _plain(send_with_headers, 413, "a request has no body here")
        elif (
            self.token is not None
            and scope["path"] not in _OPEN_PATHS
            and not self._bearer(headers.get(b"authorization", b""))
        ):
            await _plain(
                send_with_headers,
                401,
                "expected Authorization: Bearer <token>",
                [(b"www-authenticate", b'Bearer realm="ecpa"')],
            )
        else:
            inner = {**scope, "method": "GET"} if head else scope
            await self.app(inner, receive, send_with_headers)

    def _bearer(self, value: bytes) -> bool:
        assert self.token is not None
        scheme, _, given = value.partition(b" ")
        # compare_digest's time depends only on the lengths, never on where bytes differ.
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = dumps({"detail": text})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Coverage(BaseModel):
    covered: int
    slots: int


class LaunchItem(BaseModel):
    """One launch of ``GET /v1/launches``."""

    launch_id: str
    source: str
    runtime_effective: bool
    ended: bool
    ended_how: str | None
    coverage: Coverage
    started_at: int | None


class LaunchListing(BaseModel):
    """``GET /v1/launches``."""

    launches: list[LaunchItem]
    skipped: list[dict[str, str]]
    truncated: list[str]
    refreshed_at: float
    stale: bool


def _listing(snapshot: Snapshot, stale: bool) -> bytes:
    return dumps(
        {
            "launches": [e.summary for e in snapshot.entries.values()],
            "skipped": list(snapshot.skipped),
            "truncated": list(snapshot.truncated),
            "refreshed_at": snapshot.refreshed_at,
            "stale": stale,
        }
    )


def prerender(snapshot: Snapshot, metrics: Metrics, *, page_refresh_s: int) -> None:
    """Render what every request of ``snapshot`` reads (metrics, the listing, the page) once,
    in the refresher's thread, before the snapshot is served."""
    metrics.publish(snapshot)
    snapshot.rendered["listing"] = _listing(snapshot, False)
    snapshot.rendered["page"] = render_page(snapshot, stale=False, refresh_s=page_refresh_s)


def _known(launch_id: str) -> bool:
    return len(launch_id) <= MAX_LAUNCH_ID and launch_id.isprintable() and "/" not in launch_id


def _cached(snapshot: Snapshot, name: str, make: Callable[[], bytes]) -> bytes:
    found = snapshot.rendered.get(name)
    if found is None:
        found = make()
        snapshot.rendered[name] = found  # same bytes whoever makes them first
    return found


def _answer(request: Request, snapshot: Snapshot, name: str, body: bytes, media: str) -> Response:
    """``body`` (the snapshot's rendering ``name``), gzipped once per snapshot for a client
    that accepts it."""
    if not accepts_gzip(request.headers.get("accept-encoding")):
        return Response(body, media_type=media, headers=_VARY)
    packed = _cached(snapshot, f"{name}.gz", lambda: gzip_bytes(body))
    return Response(packed, media_type=media, headers={**_VARY, "content-encoding": "gzip"})


#: Whether an answer is compressed depends on the request's Accept-Encoding.
_VARY = {"vary": "accept-encoding"}


def create_app(
    board: Board, metrics: Metrics, *, token: bytes | None = None, page_refresh_s: int = 5
) -> ASGIApp:
    """The ASGI application serving ``board`` (see the module's text)."""
    app = FastAPI(
        title="ecpa serve",
        version=VERSION,
        summary="runtime_effective of ecpa launches, read-only",
        docs_url=None,  # the interactive docs load scripts from elsewhere: the schema only
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    json_type = "application/json"
    #: ``/metrics``'s body compressed to a sync point, for the snapshot last scraped only
    #: (held, and compared by identity: an id may be reused once its snapshot is gone).
    prefixed: list[tuple[Snapshot, GzipPrefix]] = []

    @app.get(
        "/v1/launches",
        response_model=LaunchListing,
        summary="Every launch of the sources, with runtime_effective and coverage",
    )
    async def launches(request: Request) -> Response:
        snapshot, stale = board.view()
        body = _cached(snapshot, "listing", lambda: _listing(snapshot, stale))
        return _answer(request, snapshot, "listing", body, json_type)

    @app.get(
        "/v1/launches/{launch_id}",
        summary="One launch: the document `ecpa status --json` prints, with its lifecycle",
        responses={404: {"description": "no such launch (or not a launch id)"}},
    )
    async def launch(launch_id: str, request: Request) -> Response:
        snapshot, _ = board.view()
        entry = snapshot.entries.get(launch_id) if _known(launch_id) else None
        if entry is None:
            return JSONResponse({"detail": "no such launch"}, status_code=404)
        name = f"launch/{launch_id}"
        body = _cached(snapshot, name, lambda: dumps(entry.document))
        return _answer(request, snapshot, name, body, json_type)

    @app.get("/metrics", summary="Prometheus metrics")
    async def prometheus(request: Request) -> Response:
        snapshot, stale = board.view()
        tail = metrics.tail(snapshot, stale)
        if not accepts_gzip(request.headers.get("accept-encoding")):
            return Response(metrics.body(snapshot) + tail, media_type=CONTENT_TYPE, headers=_VARY)
        if prefixed and prefixed[0][0] is snapshot:
            prefix = prefixed[0][1]
        else:
            prefix = GzipPrefix.of(metrics.body(snapshot))
            prefixed[:] = [(snapshot, prefix)]
        headers = {**_VARY, "content-encoding": "gzip"}
        return Response(prefix.finish(tail), media_type=CONTENT_TYPE, headers=headers)

    @app.get("/healthz", summary="Liveness and freshness")
    async def healthz() -> Response:
        snapshot, stale = board.view()
        doc = {
            "status": "stale" if stale else "ok",
            "refreshed_at": snapshot.refreshed_at,
            "age_s": round(board.age(snapshot), 3),
            "launches": len(snapshot.entries),
        }
        return JSONResponse(doc, status_code=503 if stale else 200)

    @app.get("/", summary="The status page (HTML)")
    async def page(request: Request) -> Response:
        snapshot, stale = board.view()
        body = _cached(
            snapshot, "page", lambda: render_page(snapshot, stale=stale, refresh_s=page_refresh_s)
        )
        return _answer(request, snapshot, "page", body, "text/html; charset=utf-8")

    return Guard(app, token)
