"""docs/cli.md: every ``console`` example runs and prints what the guide says.

The ```console blocks of the guide are one shell session: each ``$ `` command runs, in
order, with ``bash -c`` in one fresh directory, and its standard output and standard error
together must match the lines after it, where ``...`` stands for any text (within a line or
across lines). ``$?`` carries over from one command to the next, as in a shell. Blocks that
use the shared conformance data (``../shared/``) run in a test of their own, skipped when
``../shared`` is not beside the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import CONFORMANCE, ROOT, SHARED, needs_shared

CLI_DOC = ROOT / "docs" / "cli.md"
SHARED_REF = "../shared/"
WILDCARD = "..."
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


@dataclass(frozen=True)
class Example:
    """One ``$ `` command of the guide and the output it must print."""

    lineno: int  # of the ``$ `` line in docs/cli.md
    command: str
    expected: str


def _commands(body: list[tuple[int, str]]) -> list[Example]:
    """The examples of one console block; ``body`` is (line number, text) pairs."""
    examples: list[Example] = []
    i = 0
    while i < len(body):
        lineno, line = body[i]
        assert line.startswith("$ "), f"cli.md:{lineno}: expected a '$ ' command, found {line!r}"
        command = [line[2:]]
        i += 1
        while command[-1].endswith("\\") and i < len(body):  # a continued command line
            command.append(body[i][1])
            i += 1
        heredoc = _HEREDOC.search("\n".join(command))
        if heredoc:  # the lines up to the terminator belong to the command
            strip_tabs = "<<-" in heredoc.group(0)
            while i < len(body):
                text = body[i][1]
                command.append(text)
                i += 1
                if (text.lstrip("\t") if strip_tabs else text) == heredoc.group(2):
                    break
            else:
                raise AssertionError(f"cli.md:{lineno}: heredoc {heredoc.group(2)} not closed")
        expected: list[str] = []
        while i < len(body) and not body[i][1].startswith("$ "):
            expected.append(body[i][1])
            i += 1
        examples.append(Example(lineno, "\n".join(command), _normalize("\n".join(expected))))
    return examples


def console_blocks(text: str) -> list[list[Example]]:
    """Every ```console block of ``text``, in order, as lists of examples."""
    blocks: list[list[Example]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start = i + 1
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
            assert i < len(lines), f"cli.md:{start}: console block not closed"
            body = [(n + 1, lines[n]) for n in range(start, i)]
            blocks.append(_commands(body))
        i += 1
    return blocks


def _normalize(text: str) -> str:
    """Trailing spaces and trailing blank lines do not count."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def matches(expected: str, actual: str) -> bool:
    """``actual`` equals ``expected``, where each ``...`` in ``expected`` is any text."""
    pattern = "(?s:.*?)".join(re.escape(part) for part in expected.split(WILDCARD))
    return re.fullmatch(pattern, _normalize(actual)) is not None


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ECPA_TRUST_STORE"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(PYTHONIOENCODING="utf-8", COLUMNS="80", NO_COLOR="1", TERM="dumb")
    return env


def run_session(blocks: list[list[Example]], cwd: Path) -> None:
    """Run the examples in order in ``cwd``, as one shell session, checking each output."""
    env = _environment()
    status = 0
    for example in (e for block in blocks for e in block):
        command = example.command.replace(SHARED_REF, f"{SHARED}/")
        # Restore $? of the previous command, as a shell session would have it.
        script = f"__ecpa_doc_status() {{ return {status}; }}; __ecpa_doc_status\n{command}\n"
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=180,  # a hang still fails; a loaded machine may take a minute to start one
            check=False,
        )
        status = proc.returncode
        actual = proc.stdout.decode("utf-8", "replace")
        assert matches(example.expected, actual), (
            f"docs/cli.md:{example.lineno}: `{example.command}` (exit {status})\n"
            f"--- expected ---\n{example.expected}\n--- got ---\n{_normalize(actual)}"
        )


def _blocks() -> list[list[Example]]:
    return console_blocks(CLI_DOC.read_text(encoding="utf-8"))


def _uses_shared(block: list[Example]) -> bool:
    return any(SHARED_REF in e.command for e in block)


def test_walkthrough_runs_as_documented(tmp_path: Path) -> None:
    blocks = [b for b in _blocks() if not _uses_shared(b)]
    assert sum(len(b) for b in blocks) >= 30  # the parser found the walkthrough
    run_session(blocks, tmp_path)


@needs_shared
def test_corpus_examples_run_as_documented(tmp_path: Path) -> None:
    assert CONFORMANCE.is_dir()
    blocks = [b for b in _blocks() if _uses_shared(b)]
    assert blocks, "expected a corpus check example that uses ../shared/"
    run_session(blocks, tmp_path)


def _help_commands(*group: str) -> list[str]:
    """The command names that ``ecpa [GROUP] --help`` lists."""
    proc = subprocess.run(
        ["ecpa", *group, "--help"],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    section = proc.stdout.split("\nCommands:\n", 1)[1]
    names = []
    for line in section.splitlines():
        if not line.startswith("  "):
            break
        found = re.match(r"  ([a-z][a-z-]*)(\s|$)", line)
        if found:
            names.append(found.group(1))
    return names


def test_every_command_of_help_is_documented() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    commands = _help_commands()
    assert {"verify", "inspect", "sign", "keygen", "trust", "corpus", "demo"} <= set(commands)
    missing = [c for c in commands if not re.search(rf"`ecpa {c}\b", text)]
    for group in ("trust", "corpus"):
        subcommands = _help_commands(group)
        assert subcommands
        missing += [
            f"{group} {s}" for s in subcommands if not re.search(rf"ecpa {group} {s}\b", text)
        ]
    assert "ecpa --version" in text
    assert not missing, f"docs/cli.md does not describe: {missing}"


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ("OK a", "OK a\n", True),
        ("OK ...", "OK anything at all", True),
        ("a\n...\nz", "a\nb\nc\nz", True),
        ("key=...", "key=", True),
        ("OK a", "OK b", False),
        ("OK a", "OK a\nmore", False),
        ("a\n...\nz", "a\nz", False),
        ("", "", True),
        ("", "unexpected output", False),
    ],
)
def test_wildcard_matcher(expected: str, actual: str, ok: bool) -> None:
    assert matches(expected, actual) is ok


def test_parser_keeps_heredocs_and_continuations() -> None:
    lines = ["```console", "$ cat > f <<'EOF'", "$ not a command", "EOF"]
    lines += ["$ echo a \\", "    b", "a b", "```"]
    [block] = console_blocks("\n".join(lines))
    assert [e.command for e in block] == [
        "cat > f <<'EOF'\n$ not a command\nEOF",
        "echo a \\\n    b",
    ]
    assert [e.expected for e in block] == ["", "a b"]
