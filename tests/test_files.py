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


# --- inputs through symlinks: ssh's StrictModes, judged on the path ------------------------


def configmap_mount(root: Path, name: str, data: bytes) -> Path:
    """A Kubernetes ConfigMap or Secret volume: NAME -> ..data/NAME, ..data -> ..<time>/."""
    root.mkdir(mode=0o755)
    real = root / "..2026_12_02_10_00_00.000000001"
    real.mkdir(mode=0o755)
    (real / name).write_bytes(data)
    (real / name).chmod(0o644)
    (root / "..data").symlink_to(real.name)
    (root / name).symlink_to(f"..data/{name}")
    return root / name


def test_a_trust_store_from_a_configmap_is_read(tmp_path: Path) -> None:
    """It was refused: "a symlink (not followed)"."""
    import json

    import ecpa
    from tests._cli_helpers import ecpa_main
    from tests.support import trust_doc

    doc = trust_doc()
    link = configmap_mount(tmp_path / "trust", "trust.json", json.dumps(doc).encode())
    assert len(ecpa.TrustStore.load(link)) == len(doc["keys"])
    out = ecpa_main("trust", "check", link)
    assert out.status == 0, out


@pytest.mark.parametrize("where", ["link", "target"])
def test_a_symlink_through_a_directory_others_may_write_is_refused(
    tmp_path: Path, where: str
) -> None:
    from ecpa._files import read_bounded
    from ecpa.errors import EcpaError, ErrorCode

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may swap what is here
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    target_dir, link_dir = (shared, private) if where == "target" else (private, shared)
    target = target_dir / "key.pem"
    target.write_bytes(b"x")
    link = link_dir / "link.pem"
    link.symlink_to(target)
    with pytest.raises(EcpaError) as caught:
        read_bounded(link, 10, ErrorCode.INVALID_KEY, follow=True)
    assert caught.value.code is ErrorCode.INVALID_KEY  # the caller's code
    assert f"found {shared} with uid" in caught.value.detail
    assert "not followed" in caught.value.detail
    # The same link is never followed where the tools read their own files.
    with pytest.raises(EcpaError):
        read_bounded(link, 10, ErrorCode.INVALID_KEY)


def test_a_symlink_to_a_fifo_or_a_device_is_still_refused(tmp_path: Path) -> None:
    from ecpa._files import read_bounded
    from ecpa.errors import EcpaError, ErrorCode

    os.mkfifo(tmp_path / "fifo")
    for target in (tmp_path / "fifo", Path("/dev/zero")):
        link = tmp_path / f"link-{target.name}"
        link.symlink_to(target)
        with pytest.raises(EcpaError) as caught:
            read_bounded(link, 10, ErrorCode.INVALID_INPUT, follow=True)
        assert caught.value.code is ErrorCode.INVALID_INPUT
        assert "symlink" in caught.value.detail  # refused, by kind or by mode
