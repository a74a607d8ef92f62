"""``ecpa corpus check`` and ``ecpa corpus generate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecpa._text import json_line, safe, show
from ecpa.cli._common import EXIT_INVALID, EXIT_OK, fail_usage, read_json_object
from ecpa.corpus.runner import CORPUS_FILES, run_any, write

__all__ = ["corpus_app"]

corpus_app = typer.Typer(
    help="Run conformance corpora.",
    epilog="\b\nExamples:\n  ecpa corpus check corpus/ecpa-0.1\n"
    "  ecpa corpus generate corpus/ecpa-0.1",
    no_args_is_help=True,
)


def _corpus_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise fail_usage(f"expected corpus files (*.json) in {path}, found none")
            known = [path / name for name in CORPUS_FILES if (path / name) in found]
            files += known + [f for f in found if f not in known]
        else:
            files.append(path)
    return files


@corpus_app.command("check")
def corpus_check(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Corpus files (attestation or trust-store vectors), or directories of them.",
            show_default=False,
        ),
    ],
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every case.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per case.")] = False,
) -> None:
    """Run every case of each corpus and compare the codes; exit 0 only when all match.

    \b
    Examples:
      ecpa corpus check ../shared/conformance/upstream-ecpa-0.1/attestation-vectors.json
      ecpa corpus check corpus/ecpa-0.1
    """
    files = _corpus_files(paths)
    total = failed = 0
    for file in files:
        label = f"{show(file)} " if len(files) > 1 else ""
        results = run_any(read_json_object(file, "corpus"))
        for r in results:
            if as_json:
                typer.echo(
                    json_line(
                        {
                            "file": str(file),
                            "id": r.id,
                            "expected": r.expected,
                            "got": r.got,
                            "passed": r.passed,
                            "detail": r.detail,
                        }
                    )
                )
            elif not r.passed:
                typer.echo(
                    f"MISMATCH {label}{show(r.id)}: expected {show(r.expected)}, got {r.got}"
                    + (f" ({safe(r.detail)})" if r.detail else "")
                )
            elif verbose:
                typer.echo(f"ok {label}{show(r.id)}: {r.got}")
        total += len(results)
        failed += sum(not r.passed for r in results)
    typer.echo(f"{total - failed} passed, {failed} failed", err=as_json)
    raise typer.Exit(EXIT_OK if failed == 0 else EXIT_INVALID)


@corpus_app.command("generate")
def corpus_generate(
    directory: Annotated[Path, typer.Argument(help="Where to write the corpus files.")],
) -> None:
    """Write the project's corpus (deterministic: TEST ONLY seeds, fixed times): the
    published ECPA 0.1 cases byte for byte, the project's own cases, the trust-store cases.

    \b
    Example:
      ecpa corpus generate corpus/ecpa-0.1
    """
    for path in write(directory):
        typer.echo(f"wrote {show(path)}")
