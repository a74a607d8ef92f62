"""Helpers shared by the command-line tests (test_cli*.py): run ``ecpa`` in-process and
write evidence in each input form the CLI reads."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import ecpa
from ecpa.cli import main
from ecpa.profile.b64 import b64u_encode
from tests.support import KEY_1, NOW, header_bytes, payload_of, sign_raw, statement, trust_doc

RUNNER = CliRunner()
RECORD_SCHEMA = "ecpa-evidence-record/0.1"
OK_LINE = (
    "issuer=urn:ecpa:issuer:vllm-hust-host-a kid=test-key-1 subject=host-runtime nonce=nonce-1"
)
#: Members of each ``verify --json`` line; ``statement`` is required only when valid.
JSON_KEYS = {"input", "line", "ok", "code", "detail"}


@dataclass(frozen=True)
class Run:
    """What one ``ecpa`` invocation did: exit status, standard output, standard error."""

    status: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def ecpa_main(*args: str | Path | int, stdin: bytes | None = None) -> Run:
    """Run ``ecpa.cli.main`` (so the exit-status mapping is exercised) with captured streams
    and ``stdin`` as standard input."""
    with RUNNER.isolation(input=stdin) as (out, err, _):
        status = main([str(a) for a in args])
        sys.stdout.flush()
        sys.stderr.flush()
        return Run(status, out.getvalue().decode(), err.getvalue().decode())


def verify(*args: str | Path | int, trust: Path | None, now: int = NOW) -> Run:
    """``ecpa verify ARGS --now NOW`` with ``--trust`` when given."""
    extra: list[str | Path | int] = ["--trust", trust] if trust is not None else []
    return ecpa_main("verify", *args, *extra, "--now", now)


def signed(st: dict[str, Any] | None = None, *, key: ecpa.SigningKey = KEY_1) -> tuple[bytes, str]:
    """Canonical payload of ``st`` (default: the valid statement) and a valid detached JWS
    over it, without statement checks."""
    st = st if st is not None else statement()
    payload = payload_of(st)
    return payload, sign_raw(header_bytes(kid=st["kid"]), payload, key)


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def write_trust(directory: Path, doc: dict[str, Any] | None = None) -> Path:
    """A trust store file (default: test-key-1 and test-key-2 of the test issuer)."""
    return write_json(directory / "trust.json", doc if doc is not None else trust_doc())


def write_pair(
    directory: Path, stem: str = "ev", evidence: tuple[bytes, str] | None = None, tail: str = "\n"
) -> Path:
    """``STEM.json`` (payload) beside ``STEM.jws`` (detached JWS + ``tail``); the .jws path."""
    payload, jws = evidence if evidence is not None else signed()
    (directory / f"{stem}.json").write_bytes(payload)
    jws_path = directory / f"{stem}.jws"
    jws_path.write_bytes(jws.encode("latin-1") + tail.encode("ascii"))
    return jws_path


def bundle(evidence: tuple[bytes, str] | None = None) -> dict[str, str]:
    payload, jws = evidence if evidence is not None else signed()
    return {"payload_b64": b64u_encode(payload), "detached_jws": jws}


def record(evidence: tuple[bytes, str] | None = None, host: bytes | None = None) -> str:
    """One evidence-log line (without its newline)."""
    rec: dict[str, str] = {"schema": RECORD_SCHEMA, **bundle(evidence)}
    if host is not None:
        rec["host_evidence_b64"] = b64u_encode(host)
    return json.dumps(rec)


def json_results(out: str) -> list[dict[str, Any]]:
    """Parse ``verify --json`` output: one object per line, keys and types checked."""
    results = [json.loads(line) for line in out.splitlines()]
    for r in results:
        assert JSON_KEYS <= set(r) <= {*JSON_KEYS, "statement"}, r
        assert isinstance(r["input"], str)
        assert r["line"] is None or (isinstance(r["line"], int) and r["line"] >= 1)
        assert isinstance(r["ok"], bool)
        if r["ok"]:
            assert r["code"] is None
            assert r["detail"] is None
            assert isinstance(r["statement"], dict)
        else:
            assert isinstance(r["code"], str)
            assert isinstance(r["detail"], str)
            assert r.get("statement") is None
    return results
