"""The examples in the docs run, and the error-code table names every code."""

from __future__ import annotations

import re

import pytest

import ecpa
from tests.support import ROOT

PROFILE_DOC = ROOT / "docs" / "profile.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_profile_doc_round_trip_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = _python_blocks(PROFILE_DOC.read_text(encoding="utf-8"))
    runnable = [b for b in blocks if "SigningKey.from_seed(bytes(range(32)))" in b]
    assert len(runnable) == 1
    exec(compile(runnable[0], str(PROFILE_DOC), "exec"), {})  # our own doc
    assert capsys.readouterr().out.split() == ["launch-1", "REPLAYED_NONCE"]


def test_profile_doc_lists_every_error_code() -> None:
    text = PROFILE_DOC.read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([A-Z_]+)` \|", text, flags=re.MULTILINE))
    assert table == {code.value for code in ecpa.ErrorCode}
