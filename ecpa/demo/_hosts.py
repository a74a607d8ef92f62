"""The demo's "several hosts" act: a live launch shipped into a throw-away PostgreSQL
(``ecpa dev pg-up``, :mod:`ecpa.dev.pgcluster`) and judged from the store, as a manager on
another host would. Skipped, saying why and how, where there is no PostgreSQL or no psycopg."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ecpa.demo._tour import Tour
from ecpa.dev import pgcluster

__all__ = ["hosts_steps"]


def _why_not() -> str | None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'ecpa[postgres]')"
    if not pgcluster.available():
        return "no PostgreSQL server binaries (Debian: apt install postgresql)"
    return None


def hosts_steps(launch_dir: Path, tour: Tour) -> None:
    """Ship the launch once, then ``ecpa status --db``: true, 2/2 slots, from the store."""
    tour.act("hosts")
    why = _why_not()
    if why is not None:
        tour.say(f"(skipped: {why})")
        return
    cluster = Path(tempfile.mkdtemp(prefix="ecpa-demo-pg-", dir="/tmp"))
    try:
        tour.say(f"$ ecpa dev pg-up --no-fsync {cluster}")
        try:
            dsn = pgcluster.up(cluster, no_fsync=True)
        except pgcluster.ClusterError as exc:  # PostgreSQL is installed: it must start
            tour.say(f"ecpa: {exc}")
            tour.say("!! expected ecpa dev pg-up to start a server")
            tour.checks.append(False)
            return
        tour.say(dsn)
        ship = ["ship", "--launch", str(launch_dir), "--db", dsn, "--once"]
        tour.step(ship, 0, "line(s) stored", "copy every evidence line into the store, once")
        status = ["status", "--db", dsn, "--launch-id", launch_dir.name]
        tour.step(status, 0, "coverage: 2/2 slots", "runtime_effective from the store, on any host")
    finally:
        try:
            pgcluster.down(cluster)
        finally:
            shutil.rmtree(cluster, ignore_errors=True)
