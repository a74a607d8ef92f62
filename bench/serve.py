"""``python -m bench.serve``: what ``ecpa serve`` answers under load.

``--launches`` launch directories of ``--slots`` slots each are written directly
(``bench.launchdir``, records accepted, fresh and selecting for 5 minutes, a fake ``/proc``
in which every process is alive) and served by ``ecpa serve`` in a process of its own
(``--child``, the real ``ecpa.serve.server.serve`` with its default refresh interval of
1 s, so the refresher judges every launch again and again while the requests come). Then
``--clients`` client threads in this process each send requests back to back on a keep-alive
connection for ``--seconds`` seconds, to ``/metrics``, to the status page and then to
one launch's document; every answer is checked (200 and its size). A row gives requests per
second and the median and 99th percentile latency; the refresh time the server reports
(``ecpa_serve_refresh_seconds``) is printed beside it, since requests and the refresher
share one interpreter.

With ``--db``, the same launches are shipped (``ship_launch``, the real clock) into a
throw-away PostgreSQL (``scripts/pg-up``, or ``--pg-dsn``) and served from the store
(``ecpa serve --db``) instead of their directories (docs/scale.md "The fleet verdict").
With ``--gzip`` the clients accept gzip, as Prometheus and browsers do.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from bench.launchdir import HOST, Written, hermetic_config, write_launch
from bench.shared import server

#: Seconds between the written records, and how long they are accepted, fresh and their
#: slots selecting after they were written: 300 s, the longest a statement may live (no
#: newer record comes; before, every slot was abstaining, not covered, 30 s after the
#: launches were written, and every record expired 60 s after).
_INTERVAL = 100
_VALID_S = 300


def _write(root: Path, launches: int, slots: int) -> list[Written]:
    runs = root / "runs"
    runs.mkdir(mode=0o700)
    now = int(time.time())
    return [
        write_launch(
            runs,
            slots=slots,
            records=3,
            now=now,
            interval=_INTERVAL,
            launch_id=f"launch-{n:016x}",
            max_abstain_s=_VALID_S,
            ttl=_VALID_S,
        )
        for n in range(1, launches + 1)
    ]


def _ship_all(written: list[Written], dsn: str) -> int:
    """Every launch shipped into the store at ``dsn`` (its processes alive in the fake
    ``/proc``, by the real clock); the lines stored."""
    from ecpa.runtime.host.ship import ship_launch
    from ecpa.runtime.model.process import check_alive
    from ecpa.runtime.stores.store import EvidenceStore

    stored = 0
    with EvidenceStore(dsn) as store:
        for w in written:
            report = ship_launch(
                w.directory,
                store,
                once=True,
                liveness=lambda who, w=w: check_alive(who, proc_root=w.proc_root, host=HOST),
                clock=lambda: int(time.time()),
            )
            stored += report.stored
    return stored


def _child(runs: Path, proc_root: Path, dsn: str | None = None, judges: int = 1) -> None:
    """Serve ``runs`` (or, with ``dsn``, the store there) as ``ecpa serve`` does, with the
    fake ``/proc``; say the port."""
    from ecpa.serve.board import Sources
    from ecpa.serve.server import Listen, ServeOptions, serve

    sources = (
        Sources((runs,), limit=1000, proc_root=proc_root, host=HOST)
        if dsn is None
        else Sources(dsn=dsn, limit=1000)
    )
    options = ServeOptions(
        sources,
        Listen("127.0.0.1", 0),
        None,
        interval=1.0,
        stale_after=3600.0,
        retention_s=3600.0,
        max_connections=256,
        judges=judges,
    )
    serve(options, say=lambda line: print(line, file=sys.stderr, flush=True))


def _load(
    port: int, path: str, clients: int, seconds: float, headers: dict[str, str]
) -> tuple[int, list[float], int]:
    """Requests answered, their latencies (s) and the size of the last answer (bytes),
    ``clients`` threads for ``seconds``."""
    size = [0]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    start = threading.Barrier(clients)

    def client(mine: list[float]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        deadline = time.perf_counter() + seconds
        try:
            while (now := time.perf_counter()) < deadline:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read()
                mine.append(time.perf_counter() - now)
                size[0] = len(body)
                if response.status != 200 or not body:
                    errors.append(f"{path}: {response.status}")
                    return
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(lat,)) for lat in latencies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(errors[0])
    flat = [x for lat in latencies for x in lat]
    return len(flat), flat, size[0]


def _refresh_s(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    match = re.search(r"^ecpa_serve_refresh_seconds (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else float("nan")


def _effective(port: int) -> str:
    """How many of the served launches are effective, as ``/v1/launches`` says."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/v1/launches")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    items = doc.get("launches", doc) if isinstance(doc, dict) else doc
    true = sum(1 for item in items if item.get("runtime_effective") is True)
    return f"{true} of {len(items)} launches effective"


def measure(
    launches: int,
    slots: int,
    clients: int,
    seconds: float,
    tmp: Path,
    dsn: str | None = None,
    gzip: bool = False,
    *,
    judges: int = 1,
) -> list[str]:
    """The table's rows for one server over ``launches`` x ``slots`` (from the store at
    ``dsn``, shipped there first, when given), judging with ``judges`` processes."""
    root = Path(tempfile.mkdtemp(prefix="ecpa-bench-serve-", dir=tmp))
    rows = []
    try:
        written = _write(root, launches, slots)
        proc_root = written[-1].proc_root
        where = "directories"
        argv = [sys.executable, "-m", "bench.serve", "--child", str(root / "runs"), str(proc_root)]
        if dsn is not None:
            began = time.perf_counter()
            stored = _ship_all(written, dsn)
            where = f"store ({stored:,} lines shipped in {time.perf_counter() - began:.1f} s)"
            argv += ["--child-db", dsn]
        argv += ["--child-judges", str(judges)]
        child = subprocess.Popen(  # noqa: S603 - our own interpreter, module and arguments
            argv,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )
        try:
            assert child.stderr is not None
            line = child.stderr.readline()
            match = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", line)
            if match is None:
                raise RuntimeError(f"ecpa serve did not start: {line}{child.stderr.read()}")
            port = int(match.group(1))
            for name, path in (
                ("/metrics", "/metrics"),
                ("the page", "/"),
                ("one launch", "/v1/launches/launch-0000000000000001"),
            ):
                headers = {"Accept-Encoding": "gzip"} if gzip else {}
                count, latencies, size = _load(port, path, clients, seconds, headers)
                q = statistics.quantiles(latencies, n=100)
                rows.append(
                    f"{name:<12} {launches:>4} x {slots:<3} {count / seconds:>9,.0f} req/s"
                    f"  p50 {q[49] * 1000:7.1f} ms  p99 {q[98] * 1000:7.1f} ms"
                    f"  refresh {_refresh_s(port):6.2f} s  ({count:,} requests of {size:,} bytes"
                    f"{' gzipped' if gzip else ''},"
                    f" {clients} clients,"
                    f" from the {where}; {_effective(port)})"
                )
        finally:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=30)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__)
    parser.add_argument("--launches", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--db", action="store_true", help="serve from a throw-away PostgreSQL")
    parser.add_argument("--pg-dsn", help="with --db: this server instead of a throw-away one")
    parser.add_argument("--gzip", action="store_true", help="clients accept gzip (scrapers do)")
    parser.add_argument("--child", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-db", help=argparse.SUPPRESS)
    parser.add_argument("--judges", type=int, default=1, help="ecpa serve --judges N")
    parser.add_argument("--child-judges", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], dsn=args.child_db, judges=args.child_judges)
        return 0
    print(
        f"ecpa serve under {args.clients} concurrent clients, {os.cpu_count()} CPUs, load "
        + "/".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    for launches in args.launches:
        with ExitStack() as stack:
            dsn = stack.enter_context(server(args.pg_dsn)) if args.db else None
            if args.db and dsn is None:
                print("--db: no psycopg or no PostgreSQL server binaries", file=sys.stderr)
                return 2
            rows = measure(
                launches,
                args.slots,
                args.clients,
                args.seconds,
                args.tmp,
                dsn,
                args.gzip,
                judges=args.judges,
            )
            for row in rows:
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
