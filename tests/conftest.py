"""Shared pytest configuration: hypothesis settings profiles.

``CI`` set in the environment loads the "ci" profile (derandomized, no example database) so
that a run is reproducible; otherwise hypothesis's default profile applies. Tests set their
own ``max_examples`` and ``deadline``.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

#: A test that asks for one of these starts real processes (``ecpa run``, a PostgreSQL
#: server): it is ``e2e`` wherever it stands. Modules of such tests throughout say so
#: themselves (``pytestmark = pytest.mark.e2e``).
E2E_FIXTURES = frozenset({"launches", "pg_server", "pg_dsn"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _nothing_remembered() -> None:
    """Each test judges as a command starts: with no launch's keys remembered from another
    test (ecpa.runtime.judge.memo; the bench's launches are alike byte for byte)."""
    from ecpa.runtime.judge.memo import forget

    forget()


# The operator's configuration (docs/keys.md), the session's own: $XDG_CONFIG_HOME points at
# a private temporary directory whose ecpa/trust.json lists the TEST manager key that
# bench.launchdir certifies with, and the manager key ecpa run uses (made as on first use).
# Nothing a test does reaches the user's own ~/.config/ecpa.
_CONFIG: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    del config
    # A shell starts a background job (``bash .ci/run &``) with SIGINT and SIGQUIT ignored
    # (POSIX, without job control), and every process the tests start would inherit that:
    # ``ecpa run`` leaves a signal ignored at its start ignored, by design, so the tests of
    # its forwarding would fail. The tests start their processes as a terminal would.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    from bench.launchdir import manager_entry
    from ecpa.profile.keys import SigningKey

    home = tempfile.mkdtemp(prefix="ecpa-config-")
    _CONFIG.append(home)
    ecpa_dir = Path(home) / "ecpa"
    ecpa_dir.mkdir(mode=0o700)
    key = SigningKey.generate()  # as ecpa run makes it on first use
    (ecpa_dir / "manager-key.pem").write_bytes(key.to_pem())
    (ecpa_dir / "manager-key.pem").chmod(0o600)
    # 0.1 launches have no manager: the operator lists their shared key itself (the TEST
    # keys of tests.support, which the 0.1 launches of the tests are signed with).
    from tests.support import trust_doc

    keys = [manager_entry(), manager_entry(key), *trust_doc()["keys"]]
    trust = {"schema": "ecpa-trust-store/0.1", "keys": keys}
    (ecpa_dir / "trust.json").write_text(json.dumps(trust, indent=2) + "\n")
    os.environ["XDG_CONFIG_HOME"] = home
    for name in ("ECPA_TRUST_STORE", "ECPA_MANAGER_KEY"):
        os.environ.pop(name, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    del config
    for home in _CONFIG:
        shutil.rmtree(home, ignore_errors=True)


settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# PostgreSQL: a throw-away cluster started by the repository's own script (scripts/pg-up),
# once per session and only when a test asks for it; stopped and removed at the end.
REPO = Path(__file__).resolve().parent.parent
PG_HOW = (
    "install PostgreSQL (Debian: apt install postgresql; initdb and pg_ctl on PATH or in "
    "/usr/lib/postgresql/*/bin), or start a server with `scripts/pg-up DIR` and set "
    "ECPA_TEST_PG_DSN to the DSN it prints"
)


def _pg_binaries() -> bool:
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return True
    return any(
        os.access(os.path.join(d, "initdb"), os.X_OK)
        for d in glob.glob("/usr/lib/postgresql/*/bin")
    )


class PgServer:
    """The session's PostgreSQL server: its DSN, and stop/start for fault tests."""

    def __init__(self, dsn: str, directory: Path | None) -> None:
        self.dsn = dsn
        self.directory = directory

    def stop(self) -> None:
        assert self.directory is not None, "an outside server (ECPA_TEST_PG_DSN) is not stopped"
        subprocess.run([sys.executable, REPO / "scripts/pg-down", self.directory], check=True)

    def start(self) -> None:
        assert self.directory is not None
        out = subprocess.run(
            [sys.executable, REPO / "scripts/pg-up", "--no-fsync", self.directory],
            check=True,
            capture_output=True,
            text=True,
        )
        assert out.stdout.strip() == self.dsn, (out.stdout, self.dsn)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg 3: pip install -e '.[dev]'")
    outside = os.environ.get("ECPA_TEST_PG_DSN")
    if outside:
        yield PgServer(outside, None)
        return
    if not _pg_binaries():
        pytest.skip(f"PostgreSQL tests skipped, no server binaries found: {PG_HOW}")
    directory = Path(tempfile.mkdtemp(prefix="ecpa-pg-", dir="/tmp"))
    try:
        out = subprocess.run(  # a test cluster: no flush per commit (a clean restart keeps all)
            [sys.executable, REPO / "scripts/pg-up", "--no-fsync", directory],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if out.returncode != 0:  # the binaries are there: a server that cannot start fails
            pytest.fail(f"scripts/pg-up failed (exit {out.returncode}): {out.stderr.strip()}")
        yield PgServer(out.stdout.strip(), directory)
    finally:
        subprocess.run(
            [sys.executable, REPO / "scripts/pg-down", directory], capture_output=True, check=False
        )
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """A DSN whose search path is a fresh schema of its own: each test sees empty tables."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg_server.dsn else "?"
    yield f"{pg_server.dsn}{sep}options=-csearch_path%3D{schema}"
    try:
        with psycopg.connect(pg_server.dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    except psycopg.Error:
        pass  # a test that stopped the server: the cluster goes with the session
