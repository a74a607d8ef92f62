"""What the commands share: exit codes, reading inputs, printing safely."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import typer

from ecpa._files import MAX_INPUT_BYTES, open_regular, read_input
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.fast import frozen_instance
from ecpa.profile.strict_json import parse_object
from ecpa.runtime.model.evidence import Evidence, parse_record, read_log

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

#: Codes that mean "the input is not usable", not "the evidence is invalid": exit 2.
USAGE_CODES = frozenset(
    {
        ErrorCode.TRUST_STORE_CONFIG,
        ErrorCode.INVALID_INPUT,
        ErrorCode.INVALID_KEY,
        ErrorCode.REPLAY_STORE,
        ErrorCode.EVIDENCE_STORE,
    }
)


def fail_usage(detail: str) -> EcpaError:
    """An input that is not evidence at all (missing file, bad option): exit 2."""
    return EcpaError(ErrorCode.INVALID_INPUT, detail)


def read_json_object(path: Path, what: str, *, evidence: bool = False) -> dict[str, Any]:
    """A strict JSON object from a file.

    With ``evidence`` (a statement to sign) parse errors keep their own codes (exit 1);
    otherwise the file is configuration and a parse error is ``ECPA_INVALID_INPUT`` (exit 2).
    """
    data = read_input(path)
    try:
        return parse_object(data, what=f"{what} {path}")
    except EcpaError as exc:
        if evidence:
            raise
        raise fail_usage(f"{exc.code.value}: {exc.detail}") from None


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
        if not payload_path.is_file():
            raise fail_usage(
                f"expected the payload of {path} at {payload_path} (or given with --payload), "
                "found no such file"
            )
    payload = read_input(payload_path)
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
        raise fail_usage(f"expected at most {MAX_INPUT_BYTES} bytes on standard input")
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
    return open_regular(spec, ErrorCode.INVALID_INPUT)


def _log_items(
    name: str, stream: BinaryIO, before_stderr: Callable[[], None] | None
) -> Iterator[Item]:
    count = 0
    for line in read_log(stream):
        if line.torn:
            if before_stderr is not None:
                before_stderr()
            typer.echo(torn_message(name, line.number, line.error), err=True)
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


def evidence_items(
    spec: str, payload_path: Path | None, *, before_stderr: Callable[[], None] | None = None
) -> Iterator[Item]:
    """The items of one EVIDENCE argument: a ``.jws`` file, a ``.jsonl`` log, ``-`` (a
    bundle or a log on standard input) or a JSON bundle file. ``before_stderr`` is called
    before a line goes to standard error (a caller buffering its output flushes it).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an unreadable input (exit 2).
    """
    if spec == "-":
        data, one_object = read_stdin()
        if one_object:
            yield _bundle_item("-", data.strip())
        else:
            yield from _log_items("-", io.BytesIO(data), before_stderr)
        return
    path = Path(spec)
    if path.suffix == ".jws":
        yield _jws_item(path, payload_path)
    elif path.suffix == ".jsonl":
        with open_log(spec) as stream:
            yield from _log_items(spec, stream, before_stderr)
    else:
        yield _bundle_item(spec, read_input(path))


def display_json(data: bytes) -> Any:
    """Parse JSON for display only, lenient but total: numbers JSON cannot carry exactly
    and non-finite constants become ``{"$number": text}``, so output stays strict JSON."""
    try:
        return json.loads(
            data,
            parse_float=lambda text: {"$number": text},
            parse_constant=lambda text: {"$number": text},
            parse_int=lambda text: int(text) if len(text) < 40 else {"$number": text},
        )
    except (ValueError, RecursionError):
        return {"error": "not JSON", "text": data.decode("utf-8", "replace")}
