"""Start-up is paid for by what runs: ``ecpa --version`` loads neither typer nor
the library, ``ecpa --help`` lists every command without importing one, and a command
imports only its own module. Speed itself is measured by ``python -m bench.startup``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from bench.cli_logs import NOW, Workdir
from bench.launchdir import write_launch
from ecpa.cli import main
from ecpa.cli._app import COMMANDS, version_line
from tests._cli_helpers import ecpa_main

#: Runs the installed script's entry point with ARGV, then prints the modules it loaded.
_PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['ecpa', *json.loads(sys.argv[1])]\n"
    "from ecpa.cli import script\n"
    "script()\n"
)


def _loaded(*argv: str) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    modules = json.loads(done.stderr.rsplit("MODULES ", 1)[1])
    return done.returncode, done.stdout, set(modules)


def _library(modules: set[str]) -> set[str]:
    """The modules of ecpa beyond the command line's root and the shared helpers."""
    light = {"ecpa", "ecpa.cli", "ecpa.errors", "ecpa._files", "ecpa._text"}
    light |= {"ecpa.cli._app", "ecpa.cli._common", "ecpa.profile", "ecpa.profile.ids"}
    light |= {"ecpa.demo", "ecpa.demo.acts"}  # data only: the demo's acts for its help
    return {m for m in modules if m.startswith("ecpa") and m not in light}


def _pydantic(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core")}


def test_version_loads_neither_typer_nor_pydantic_nor_the_library() -> None:
    status, out, modules = _loaded("--version")
    assert (status, out) == (0, version_line() + "\n")
    assert not {m for m in modules if m.split(".")[0] in ("pydantic", "typer", "click")}
    assert {m for m in modules if m.startswith("ecpa")} <= {"ecpa", "ecpa.cli", "ecpa.profile"} | {
        "ecpa.profile.ids"
    }


def test_version_in_process_says_the_same() -> None:
    run = ecpa_main("--version")
    assert (run.status, run.out) == (0, version_line() + "\n")


def test_help_lists_every_command_without_importing_one() -> None:
    status, out, modules = _loaded("--help")
    assert status == 0
    for name in COMMANDS:
        assert re.search(rf"^  {name} ", out, re.MULTILINE), name
    assert not {m for m in modules if m.split(".")[0] == "pydantic"}
    assert _library(modules) == set()


@pytest.mark.parametrize("argv", [["verify", "--help"], ["keygen", "--help"]])
def test_a_command_imports_its_own_module_only(argv: list[str]) -> None:
    status, out, modules = _loaded(*argv)
    assert status == 0
    assert "Usage: ecpa " + argv[0] in out
    others = {f"ecpa.cli.{c.module}" for c in COMMANDS.values()} - {
        f"ecpa.cli.{COMMANDS[argv[0]].module}",
        "ecpa.cli._app",
    }
    assert modules & others == set()
    assert _pydantic(modules) == set()  # (a command's help, ecpa run's aside)


def _first_sentence(text: str) -> str:
    paragraph = " ".join(text.split("\n\n")[0].split())
    match = re.match(r"(.*?\.)(\s|$)", paragraph)
    return match.group(1) if match else paragraph


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_summary_is_the_commands_own_first_sentence(name: str) -> None:
    module, attribute, summary = COMMANDS[name]
    sub = getattr(__import__(f"ecpa.cli.{module}", fromlist=[attribute]), attribute)
    command = typer.main.get_command(sub)
    assert command.help is not None
    assert summary == _first_sentence(command.help)


def test_an_unknown_command_is_a_usage_error() -> None:
    assert main(["no-such-command"]) == 2


def test_verify_and_status_load_no_pydantic(tmp_path: Path) -> None:
    """The two commands run most often never import pydantic (about 80 ms of start-up):
    the statement, the trust store and the launch's records are shapes, and typer is below
    0.29, which coerced each parameter through pydantic (docs/performance.md)."""
    work = Workdir(tmp_path)
    jws = work.pair("one")
    status, out, modules = _loaded(
        "verify", str(jws), "--trust", str(work.trust), "--now", str(NOW)
    )
    assert (status, out.split(" ")[0]) == (0, "OK")
    assert _pydantic(modules) == set()
    written = write_launch(tmp_path / "launches", slots=2, records=5, now=NOW)
    status, out, modules = _loaded("status", "--launch", str(written.directory), "--now", str(NOW))
    assert status in (0, 1)
    assert out.startswith("runtime_effective: "), out
    assert "slot scheduler.1" in out  # it read and judged the launch's evidence
    assert _pydantic(modules) == set()
    # What a failure needs is loaded only then: a bad binding file is still refused, in words.
    (tmp_path / "bad.json").write_text('{"plan_id": ""}')
    status, out, modules = _loaded(
        "verify", str(jws), "--trust", str(work.trust), "--binding", str(tmp_path / "bad.json")
    )
    assert status == 2
    assert _pydantic(modules) == set()
