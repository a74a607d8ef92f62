"""The one atomic writer (``ecpa._files.write_file``): whole or not at all, never over a
file it must not replace, never through a symlink, its mode from the first byte, and
through a directory descriptor wherever that directory has been moved."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ecpa._files import write_file


def _leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_a_new_file_has_its_mode_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)
    try:
        write_file(tmp_path / "key", b"secret", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "key").read_bytes() == b"secret"
    assert stat.S_IMODE((tmp_path / "key").stat().st_mode) == 0o600


def test_replace_false_never_writes_over_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        write_file(target, b"new", replace=False)
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []
    write_file(target, b"new")  # replace: the default
    assert target.read_bytes() == b"new"


def test_a_symlink_at_the_path_is_replaced_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    (tmp_path / "link").symlink_to(victim)
    write_file(tmp_path / "link", b"data")
    assert victim.read_bytes() == b"untouched"
    assert not (tmp_path / "link").is_symlink()
    assert (tmp_path / "link").read_bytes() == b"data"


def test_through_a_directory_descriptor_after_a_rename(tmp_path: Path) -> None:
    first = tmp_path / "a"
    first.mkdir()
    fd = os.open(first, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first.rename(tmp_path / "b")
        first.mkdir()  # a decoy at the old path
        write_file(first / "f", b"x", dir_fd=fd)
    finally:
        os.close(fd)
    assert (tmp_path / "b" / "f").read_bytes() == b"x"
    assert list(first.iterdir()) == []


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        write_file(tmp_path / "dir", b"x")  # renaming a file over a directory fails
    assert _leftovers(tmp_path) == []
    assert (tmp_path / "dir").is_dir()
