"""The evidence store's DSN from ``ECPA_DB`` when ``--db`` is absent (a password need not be
on the command line, where ``ps`` shows it), and never when another source is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._cli_helpers import ecpa_main

NOT_A_DSN = "not-a-dsn.db"  # refused as such: proof the variable was read


@pytest.fixture
def env_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "ECPA_DB", NOT_A_DSN)


@pytest.mark.usefixtures("env_db")
@pytest.mark.parametrize(
    "args",
    [
        ("status", "--launch-id", "launch-0123456789abcdef"),
        ("ship", "--launch", "."),
        ("launches",),
        ("audit", "--launch-id", "launch-0123456789abcdef"),
        ("serve",),
    ],
)
def test_ecpa_db_is_the_store_when_no_other_source_is_given(args: tuple[str, ...]) -> None:
    out = ecpa_main(*args)
    assert out.status == 2, out
    assert "expected --db postgresql://" in out.err


@pytest.mark.usefixtures("env_db")
def test_ecpa_db_is_not_used_beside_another_source(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    listed = ecpa_main("launches", "--evidence-dir", runs)
    assert listed.status == 0, listed
    status = ecpa_main("status", "--launch", tmp_path / "none")
    assert status.status == 2
    assert "expected a launch directory" in status.err  # not a complaint about ECPA_DB
