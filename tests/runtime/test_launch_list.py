"""The launch listing behind ``ecpa launches`` (:mod:`ecpa.runtime.host.launches`): names
checked before a path is built, the directory read no further than its cap, and the store's
read-only listing of launch ids."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime import LAUNCH_DIR_NAME, list_launches
from ecpa.runtime.host import launches as module
from ecpa.runtime.stores.store import EvidenceStore


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("launch-0123456789abcdef", True),
        ("launch-0123456789ABCDEF", False),
        ("launch-0123456789abcde", False),
        ("launch-0123456789abcdef0", False),
        ("launch-../../etc/passw", False),
        ("launch-0123456789abcdef\n", False),
    ],
)
def test_only_launch_and_16_hex_is_a_launch_name(name: str, ok: bool) -> None:
    assert bool(LAUNCH_DIR_NAME.fullmatch(name)) is ok


def test_a_huge_directory_is_read_up_to_the_cap_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(50):
        (tmp_path / f"file-{index}").touch()
    read = [0]
    real = os.scandir

    class Counting:
        def __init__(self, path: Any) -> None:
            self.inner = real(path)

        def __enter__(self) -> Iterator[os.DirEntry[str]]:
            self.inner.__enter__()
            return self._each()

        def _each(self) -> Iterator[os.DirEntry[str]]:
            for entry in self.inner:
                read[0] += 1
                yield entry

        def __exit__(self, *exc: object) -> None:
            self.inner.__exit__(*exc)

    monkeypatch.setattr(module.os, "scandir", Counting)
    found = list_launches([tmp_path], now=0, max_entries=10)
    assert read[0] == 11  # the cap, and the one entry that shows there are more
    assert found.launches == ()
    assert len(found.skipped) == 10
    assert found.truncated == (
        f"{tmp_path}: stopped after reading 10 entries (the rest not listed)",
    )


def test_a_directory_that_cannot_be_listed_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(EcpaError) as caught:
        list_launches([tmp_path / "missing"], now=0)
    assert caught.value.code is ErrorCode.INVALID_INPUT


def test_the_store_lists_launch_ids_in_order_up_to_a_limit(pg_dsn: str) -> None:
    with EvidenceStore(pg_dsn) as store:
        assert store.launch_ids(10) == []
        for launch_id in ("launch-b", "launch-a", "launch-c"):
            store.put_launch(launch_id, "host", b"{}", None, None)
        assert store.launch_ids(10) == ["launch-a", "launch-b", "launch-c"]
        assert store.launch_ids(2) == ["launch-a", "launch-b"]
        assert store.launch_ids(0) == []
