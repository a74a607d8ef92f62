"""The examples in the docs run, and the error-code and reason-code tables name every code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ecpa
from ecpa.runtime.judge.reasons import FAILING, ReasonCode
from tests.support import ROOT

PROFILE_DOC = ROOT / "docs" / "profile.md"
RUNTIME_DOC = ROOT / "docs" / "runtime.md"


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


def test_runtime_doc_lists_every_reason_code_and_what_fails() -> None:
    text = RUNTIME_DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (passes|fails|note) \| \S", text, flags=re.MULTILINE)
    kinds = dict(rows)
    assert len(kinds) == len(rows)  # each code once
    assert set(kinds) == {code.value for code in ReasonCode}
    assert {code for code, kind in kinds.items() if kind == "fails"} == {c.value for c in FAILING}


def test_the_test_files_named_in_the_docs_and_the_code_exist() -> None:
    """Docs, docstrings and comments name test modules by path (``tests/<room>/test_x.py``,
    the tests mirror the rooms): each path named exists, so a moved test leaves no stale
    pointer behind."""
    sources = [ROOT / "pyproject.toml"]
    sources += [p for p in sorted(ROOT.rglob("*.md")) if ".venv" not in p.parts]
    for package in ("ecpa", "dla_plugin", "bench", "fuzz", "tests"):
        sources += sorted((ROOT / package).rglob("*.py"))
    named = {
        (source.relative_to(ROOT).as_posix(), path)
        for source in sources
        for path in re.findall(r"\btests/[\w/]*\.py\b", source.read_text(encoding="utf-8"))
    }
    assert len(named) >= 10, named  # guards the test itself
    assert sorted(f"{src}: {path}" for src, path in named if not (ROOT / path).is_file()) == []


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, flags=re.DOTALL)
    tests_command = next(block for block in blocks if "pytest" in block)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip("\n").splitlines()[-1]
    assert ci == tests_command
    assert "scripts/chromium-up" in ci  # the page tests' browser, installed when missing


def test_the_readmes_quick_start_runs_as_written(tmp_path: Path) -> None:
    """README.md's quick start, as written, in an empty directory with the installed ``ecpa``
    on PATH (where ``. .venv/bin/activate`` puts it): every command succeeds and the evidence
    verifies at the current time, so nothing in it may be dated once and for all."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, flags=re.DOTALL)
    (quick_start,) = [block for block in blocks if "cat > statement.json" in block]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-e", "-u", "-c", quick_start],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\nOK evidence.jws issuer=urn:ecpa:issuer:host-a kid=key-1 " in done.stdout
    assert "UNVERIFIED evidence.jws" in done.stdout
