"""The package as a user installs it: a wheel built from this checkout, installed
with its extras in a fresh virtual environment, run in an empty directory, far from the
checkout. It carries its licence and its corpus, checks the corpus by itself, and its demo
runs every step, PostgreSQL included (``ecpa dev pg-up``, no ``scripts/``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ecpa.dev import pgcluster

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.e2e


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``argv`` in its own session, killed with all it started if it outlives ``timeout``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{argv} took more than {timeout} s:\n{out[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)], dist
    )
    assert built.returncode == 0, built.stdout
    (found,) = dist.glob("ecpa-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its postgres and serve extras; its ``bin``."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run([sys.executable, "-m", "venv", str(venv)], venv)
    assert made.returncode == 0, made.stdout
    pip = _run([str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[postgres,serve]"], venv)
    assert pip.returncode == 0, pip.stdout
    return venv / "bin"


def test_the_wheel_carries_its_licence_and_its_corpus(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    licence = [n for n in names if n.endswith("/LICENSE")]
    assert licence, names
    text = zipfile.ZipFile(wheel).read(licence[0]).decode()
    assert "Apache License" in text
    assert "Version 2.0" in text
    vectors = {Path(n).name for n in names if n.startswith("ecpa/corpus/vectors/")}
    assert vectors == {
        "attestation-vectors.json",
        "attestation-vectors-extended.json",
        "trust-store-vectors.json",
    }


def test_corpus_check_builtin_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    where = _run([str(installed / "python"), "-c", "import ecpa; print(ecpa.__file__)"], tmp_path)
    assert str(installed.parent) in where.stdout, where.stdout  # not the checkout's ecpa
    done = _run([str(installed / "ecpa"), "corpus", "check", "--builtin"], tmp_path)
    assert done.returncode == 0, done.stdout
    passed, failed = done.stdout.strip().splitlines()[-1].split(", ")
    assert int(passed.split()[0]) >= 400
    assert failed == "0 failed"
    assert list(tmp_path.iterdir()) == []  # it wrote nothing where it ran


@pytest.mark.skipif(not pgcluster.available(), reason="no PostgreSQL server programs")
def test_dev_pg_up_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    cluster = Path("/tmp") / f"ecpa-wheel-pg-{os.getpid()}"
    try:
        up = _run(
            [str(installed / "ecpa"), "dev", "pg-up", "--no-fsync", str(cluster), "--json"],
            tmp_path,
        )
        assert up.returncode == 0, up.stdout
        doc = json.loads(up.stdout.strip().splitlines()[-1])
        assert doc["dsn"].startswith("postgresql://postgres@/postgres?host=")
    finally:
        _run([str(installed / "ecpa"), "dev", "pg-down", str(cluster)], tmp_path)
        subprocess.run(["rm", "-rf", str(cluster)], check=False)


@pytest.mark.skipif(not pgcluster.available(), reason="no PostgreSQL server programs")
def test_the_demo_runs_every_step_from_the_installed_package(
    installed: Path, tmp_path: Path
) -> None:
    done = _run([str(installed / "ecpa"), "demo"], tmp_path, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "(skipped" not in done.stdout, done.stdout
    last = done.stdout.strip().splitlines()[-1]
    passed, _, total = last.partition(" of ")
    assert passed == total.split()[0], last
    assert "ecpa dev pg-up" in done.stdout  # the PostgreSQL act ran, from the package
    assert list(tmp_path.iterdir()) == []  # the demo's directory was its own, and removed
