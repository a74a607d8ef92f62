"""The demo's "several hosts" act: a live launch shipped into a throw-away PostgreSQL
(``scripts/pg-up`` of a source checkout) and judged from the store, as a manager on another
host would. Skipped, saying why and how, where there is no PostgreSQL, no psycopg or no
``scripts/`` (an installed wheel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ecpa.demo._tour import Tour

__all__ = ["hosts_steps"]

_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _why_not() -> str | None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    if not (_SCRIPTS / "pg-up").is_file():
        return "no scripts/pg-up beside this ecpa (run the demo from a source checkout)"
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        return "no PostgreSQL server binaries (Debian: apt install postgresql)"
    return None


def hosts_steps(launch_dir: Path, tour: Tour) -> None:
    """Ship the launch once, then ``ecpa status --db``: true, 2/2 slots, from the store."""
    tour.say("\n# several hosts: the evidence shipped into PostgreSQL, judged from there")
    why = _why_not()
    if why is not None:
        tour.say(f"(skipped: {why})")
        return
    cluster = Path(tempfile.mkdtemp(prefix="ecpa-demo-pg-", dir="/tmp"))
    try:
        tour.say(f"$ scripts/pg-up {cluster}")
        up = subprocess.run(  # noqa: S603 - our own script, by absolute path
            [sys.executable, _SCRIPTS / "pg-up", "--no-fsync", cluster],
            capture_output=True,
            text=True,
            check=False,
        )
        if up.returncode != 0:  # PostgreSQL is installed: a server that cannot start fails
            tour.say(up.stderr.rstrip("\n"))
            tour.say("!! expected scripts/pg-up to start a server")
            tour.checks.append(False)
            return
        dsn = up.stdout.strip()
        tour.say(dsn)
        ship = ["ship", "--launch", str(launch_dir), "--db", dsn, "--once"]
        tour.step(ship, 0, "line(s) stored", "copy every evidence line into the store, once")
        status = ["status", "--db", dsn, "--launch-id", launch_dir.name]
        tour.step(status, 0, "coverage: 2/2 slots", "runtime_effective from the store, on any host")
    finally:
        subprocess.run(  # noqa: S603 - our own script, by absolute path
            [sys.executable, _SCRIPTS / "pg-down", cluster], capture_output=True, check=False
        )
        shutil.rmtree(cluster, ignore_errors=True)
