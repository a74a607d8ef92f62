"""``ecpa serve``'s usage errors (exit 2, before anything listens), in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._cli_helpers import ecpa_main

TOKEN = "s3cret-token-0123456789abcdef"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    directory = tmp_path / "runs"
    directory.mkdir(mode=0o700)
    return directory


def token_file(tmp_path: Path, text: str = TOKEN + "\n", mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "10.1.2.3", "example.com", "[2001:db8::1]"])
def test_beyond_loopback_without_a_token_exits_2(runs: Path, host: str) -> None:
    out = ecpa_main("serve", "--evidence-dir", runs, "--listen", f"{host}:0")
    assert out.status == 2, out
    assert "expected --token-file FILE" in out.err
    assert "beyond loopback" in out.err


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        (TOKEN, 0o644, "with mode 0600 (or root"),
        (TOKEN, 0o640, "with mode 0600 (or root"),
        ("short", 0o600, "at least 16 printable"),
        ("has a space in it, sixteen+", 0o600, "at least 16 printable"),
        ("", 0o600, "at least 16 printable"),
    ],
)
def test_a_bad_token_file_exits_2_without_saying_the_token(
    runs: Path, tmp_path: Path, text: str, mode: int, expected: str
) -> None:
    path = token_file(tmp_path, text, mode)
    out = ecpa_main("serve", "--evidence-dir", runs, "--listen", "0.0.0.0:0", "--token-file", path)
    assert out.status == 2, out
    assert expected in out.err
    assert (text or "\0") not in out.err


def test_a_symlink_others_could_redirect_or_a_missing_token_file_exits_2(
    runs: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may replace what is here (not sticky)
    real = token_file(shared)
    link = tmp_path / "link"
    link.symlink_to(real)
    out = ecpa_main("serve", "--evidence-dir", runs, "--listen", "0.0.0.0:0", "--token-file", link)
    assert out.status == 2
    assert "symlink" in out.err
    assert f"found {shared} with uid" in out.err
    out = ecpa_main(
        "serve", "--evidence-dir", runs, "--token-file", tmp_path / "none", "--listen", "0.0.0.0:0"
    )
    assert out.status == 2


def test_a_kubernetes_secret_mount_is_read(tmp_path: Path) -> None:
    """A Secret or ConfigMap volume: token -> ..data/token, ..data -> ..2026_.../, in a
    directory of root's (the test's user here) that others may not write."""
    from ecpa.serve.server import read_token

    mount = tmp_path / "secret"
    (mount / "..2026_12_02_10_00_00.123").mkdir(parents=True)
    (mount / "..2026_12_02_10_00_00.123" / "token").write_text(TOKEN + "\n")
    (mount / "..2026_12_02_10_00_00.123" / "token").chmod(0o600)
    (mount / "..data").symlink_to("..2026_12_02_10_00_00.123")
    (mount / "token").symlink_to("..data/token")
    assert read_token(mount / "token") == TOKEN.encode()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "expected --evidence-dir DIR or --db DSN"),
        (("--evidence-dir", "no-such-dir"), "expected an evidence directory"),
        (("--db", "file.db"), "expected --db postgresql://"),
        (("--evidence-dir", ".", "--listen", "9464"), "expected --listen HOST:PORT"),
        (("--evidence-dir", ".", "--listen", "127.0.0.1:70000"), "expected --listen HOST:PORT"),
        (("--evidence-dir", ".", "--interval", "0"), "expected --interval within"),
        (("--evidence-dir", ".", "--interval", "nan"), "expected --interval within"),
        (("--evidence-dir", ".", "--stale-after", "0.5"), "expected --stale-after within"),
        (("--evidence-dir", ".", "--retention", "-1"), "expected --retention within"),
        (("--evidence-dir", ".", "--limit", "0"), "expected --limit within"),
        (("--evidence-dir", ".", "--judges", "-1"), "expected --judges within [1, 64]"),
        (("--evidence-dir", ".", "--judges", "65"), "expected --judges within [1, 64]"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], expected: str) -> None:
    out = ecpa_main("serve", *args)
    assert out.status == 2, out
    assert expected in out.err


def test_judges_0_is_one_per_usable_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ecpa.serve.board import Sources
    from ecpa.serve.server import serve_options

    def judges(n: int) -> int:
        options = serve_options(
            Sources((tmp_path,), None, 10),
            listen="127.0.0.1:0",
            token_file=None,
            interval=1.0,
            stale_after=None,
            retention_s=0.0,
            judges=n,
        )
        return options.judges

    assert judges(0) == min(len(os.sched_getaffinity(0)), 64)
    assert (judges(1), judges(2), judges(64)) == (1, 2, 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(128)))
    assert judges(0) == 64  # one per CPU, at most 64
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert judges(0) == 1  # the CPUs this process may use, not the machine's


def test_the_store_can_come_from_ecpa_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "ECPA_DB", "not-a-dsn.db")
    out = ecpa_main("serve")
    assert out.status == 2
    assert "expected --db postgresql://" in out.err


def test_an_address_in_use_exits_2(runs: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = ecpa_main("serve", "--evidence-dir", runs, "--listen", f"127.0.0.1:{port}")
    assert out.status == 2, out
    assert f"expected to listen on 127.0.0.1:{port}" in out.err


def test_help_names_the_endpoints_and_the_token() -> None:
    out = ecpa_main("serve", "--help")
    assert out.status == 0
    for word in ("/v1/launches", "/metrics", "/healthz", "--token-file", "ECPA_DB", "Exit status"):
        assert word in out.out, word
    assert "list[" not in out.out
