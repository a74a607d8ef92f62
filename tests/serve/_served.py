"""An ``ecpa serve`` app on uvicorn in a thread of the test, on a free loopback port, over
launch directories written as ``ecpa run`` writes them (``bench.launchdir``) with a fake
``/proc`` in which their processes are alive; stopped when the test ends, even on failure."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from bench.launchdir import HOST, Written, write_launch
from ecpa.serve.app import create_app, prerender
from ecpa.serve.board import Board, Sources
from ecpa.serve.metrics import Metrics
from ecpa.serve.server import Listen, bind, uvicorn_config


def chromium() -> str:
    """Debian's chromium (``scripts/chromium-up``, run by ``.ci/run``, installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.geteuid() == 0:
            pytest.fail("no chromium: `bash .ci/run` installs it (scripts/chromium-up)")
        pytest.skip("no chromium, and not root to install it: apt-get install -y chromium")
    return found


def render_dom(url: str) -> str:
    """The DOM headless Chromium builds from the page at ``url``."""
    out = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


INTERVAL = 100  # seconds between the written records: they stay fresh through a test


def launch_id(n: int) -> str:
    return f"launch-{n:016x}"


def write_runs(
    root: Path, count: int = 1, slots: int = 2, *, host_evidence: bool = False
) -> list[Written]:
    """``count`` launches of ``slots`` slots in ``root`` (0700, like ``ecpa run``'s)."""
    root.mkdir(mode=0o700, exist_ok=True)
    now = int(time.time())
    return [
        write_launch(
            root,
            slots=slots,
            records=3,
            now=now,
            interval=INTERVAL,
            launch_id=launch_id(i),
            host_evidence=host_evidence,
        )
        for i in range(1, count + 1)
    ]


@dataclass
class Served:
    board: Board
    metrics: Metrics
    port: int

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return (
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def get_json(self, path: str, headers: dict[str, str] | None = None) -> Any:
        status, _, body = self.request("GET", path, headers)
        assert status == 200, (status, body)
        return json.loads(body)

    def metrics_text(self) -> str:
        status, headers, body = self.request("GET", "/metrics")
        assert status == 200, body
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        return body.decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` (exactly those labels, in any order) in a
    Prometheus text exposition; None when there is none."""
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(
            re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or "")
        )
        if found == labels:
            return float(match.group(3))
    return None


@contextmanager
def served(
    sources: Sources,
    *,
    token: bytes | None = None,
    interval: float = 60.0,
    stale_after: float = 600.0,
    retention_s: float = 3600.0,
    refresher: bool = False,
    head_timeout_s: float = 10.0,
    max_connections: int = 64,
    apart: bool = False,
    judges: int = 1,
) -> Iterator[Served]:
    metrics = Metrics(retention_s)
    board = Board(
        sources,
        interval=interval,
        stale_after=stale_after,
        publish=lambda snap: prerender(snap, metrics, page_refresh_s=5),
        apart=apart,
        judges=judges,
    )
    board.refresh()
    sock = bind(Listen("127.0.0.1", 0))
    app = create_app(board, metrics, token=token)
    config = uvicorn_config(app, head_timeout_s=head_timeout_s, max_connections=max_connections)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    if refresher:
        board.start()
    try:
        yield Served(board, metrics, sock.getsockname()[1])
    finally:
        board.stop()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def sources_of(root: Path, written: list[Written], **kwargs: Any) -> Sources:
    """The sources of launches written in ``root``, their fake ``/proc`` and host."""
    return Sources((root,), proc_root=written[0].proc_root, host=HOST, **kwargs)
