"""The EVIDENCE arguments of ``ecpa verify`` and ``ecpa inspect`` read as items: a ``.jws``
file and its payload, a JSON bundle, a ``.jsonl`` evidence log (an item per line), or standard
input (``-``: a bundle or a log)."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ecpa._files import MAX_INPUT_BYTES, open_regular, read_input
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime import Evidence, parse_record, read_log
from ecpa.shapes.shape import frozen_instance

__all__ = [
    "Item",
    "evidence_items",
    "file_item",
    "no_records",
    "open_log",
    "read_stdin",
    "torn_message",
]


@dataclass(frozen=True)
class Item:
    """One piece of evidence named for output: ``path`` or ``path:line``."""

    input: str
    line: int | None
    evidence: Evidence | None
    error: EcpaError | None

    @property
    def name(self) -> str:
        return self.input if self.line is None else f"{self.input}:{self.line}"


def _jws_item(path: Path, payload_path: Path | None) -> Item:
    text = read_input(path)
    if text.endswith(b"\n"):  # one trailing newline is allowed, nothing more
        text = text[:-1]
    if payload_path is None:
        payload_path = path.with_suffix(".json")
        if not os.path.lexists(payload_path):  # there, of any kind: read_input says what
            raise invalid_input(
                f"expected the payload of {path} at {payload_path} (or given with --payload), "
                "found no such file"
            )
    try:
        payload = read_input(payload_path)
    except EcpaError as exc:  # a FIFO, a directory, a device, unreadable: said as found
        raise EcpaError(exc.code, f"the payload of {path}: {exc.detail}") from None
    evidence = Evidence(payload=payload, detached_jws=text.decode("latin-1"))
    return Item(str(path), None, evidence, None)


def torn_message(name: str, number: int, error: EcpaError | None) -> str:
    """The standard-error line for a torn last line of a log (one process or several)."""
    return (
        f"ecpa: {name}:{number}: skipped a torn last line (a write cut short by a crash): "
        f"{error.detail if error else ''}"
    )


def no_records() -> EcpaError:
    """The item of a log with no evidence record at all."""
    return EcpaError(ErrorCode.INVALID_RECORD, "expected at least one evidence record, found none")


def read_stdin() -> tuple[bytes, bool]:
    """Standard input as evidence: at most ``MAX_INPUT_BYTES``; True when it is one JSON
    object (a bundle, pretty-printed or not), False for a log.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when it is too long (exit 2).
    """
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise invalid_input(f"expected at most {MAX_INPUT_BYTES} bytes on standard input")
    try:
        parse_object(data, what="standard input")
    except EcpaError:
        return data, False
    return data, True


def open_log(spec: str) -> BinaryIO:
    """An evidence log opened for reading.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when it cannot be opened (exit 2).
    """
    return open_regular(spec, ErrorCode.INVALID_INPUT, follow=True)


def _log_items(name: str, stream: BinaryIO, warn: Callable[[str], None]) -> Iterator[Item]:
    count = 0
    for line in read_log(stream):
        if line.torn:
            warn(torn_message(name, line.number, line.error))
            continue
        count += 1
        yield frozen_instance(
            Item,
            {"input": name, "line": line.number, "evidence": line.evidence, "error": line.error},
        )
    if count == 0:
        yield Item(name, None, None, no_records())


def _bundle_item(name: str, data: bytes) -> Item:
    try:
        return Item(name, None, parse_record(data), None)
    except EcpaError as exc:
        return Item(name, None, None, exc)


def file_item(spec: str, payload_path: Path | None) -> Item:
    """The item of an EVIDENCE argument that is one file: a ``.jws`` file (its payload
    beside it, or ``payload_path``) or a JSON bundle.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an unreadable input (exit 2).
    """
    path = Path(spec)
    if path.suffix == ".jws":
        return _jws_item(path, payload_path)
    return _bundle_item(spec, read_input(path))


def evidence_items(
    spec: str, payload_path: Path | None, *, warn: Callable[[str], None]
) -> Iterator[Item]:
    """The items of one EVIDENCE argument: a ``.jws`` file, a ``.jsonl`` log, ``-`` (a
    bundle or a log on standard input) or a JSON bundle file. ``warn`` gets each line for
    standard error (a torn last line of a log), in its place among the items.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an unreadable input (exit 2).
    """
    if spec == "-":
        data, one_object = read_stdin()
        if one_object:
            yield _bundle_item("-", data.strip())
        else:
            yield from _log_items("-", io.BytesIO(data), warn)
        return
    if Path(spec).suffix == ".jsonl":
        with open_log(spec) as stream:
            yield from _log_items(spec, stream, warn)
    else:
        yield file_item(spec, payload_path)
