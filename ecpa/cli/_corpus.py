"""``ecpa corpus check`` and ``ecpa corpus generate``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

import typer

from ecpa._text import json_line, safe, show
from ecpa.cli._app import command_group
from ecpa.cli._common import EXIT_INVALID, EXIT_OK, echo_json, fail_usage, read_json_object
from ecpa.cli._options import JsonLines
from ecpa.cli._progress import progress
from ecpa.corpus.runner import BUILTIN, corpus_files, run_any, write

__all__ = ["corpus_app"]

corpus_app = command_group(
    "Run conformance corpora.",
    "\b\nExamples:\n  ecpa corpus check --builtin\n  ecpa corpus check corpus/ecpa-0.1\n"
    "  ecpa corpus generate corpus/ecpa-0.1",
)


@corpus_app.command("check")
def corpus_check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH...",
            help="Corpus files (attestation or trust-store vectors), or directories of them.",
            show_default=False,
        ),
    ] = None,
    builtin: Annotated[
        bool, typer.Option("--builtin", help="The corpus this package carries (407 cases).")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every case.")] = False,
    as_json: JsonLines = False,
) -> None:
    """Run every case of each corpus and compare the codes; exit 0 only when all match.

    \b
    Examples:
      ecpa corpus check --builtin
      ecpa corpus check ../shared/conformance/upstream-ecpa-0.1/attestation-vectors.json
    """
    if builtin == bool(paths):
        found = "both" if builtin else "neither"
        raise fail_usage(f"expected PATH... or --builtin (the package's own corpus), found {found}")
    files = corpus_files([BUILTIN] if builtin else paths or [])
    total = failed = 0
    with progress(len(files), "corpus files") as advance:
        for file in files:
            label = f"{show(file)} " if len(files) > 1 else ""
            results = run_any(read_json_object(file, "corpus"))
            for r in results:
                if as_json:
                    got = {"expected": r.expected, "got": r.got, "passed": r.passed}
                    echo_json({"file": str(file), "id": r.id} | got | {"detail": r.detail})
                elif not r.passed:
                    typer.echo(
                        f"MISMATCH {label}{show(r.id)}: expected {show(r.expected)}, got {r.got}"
                        + (f" ({safe(r.detail)})" if r.detail else "")
                    )
                elif verbose:
                    typer.echo(f"ok {label}{show(r.id)}: {r.got}")
            total += len(results)
            failed += sum(not r.passed for r in results)
            if advance is not None:
                advance(1)
    typer.echo(f"{total - failed} passed, {failed} failed", err=as_json)
    raise typer.Exit(EXIT_OK if failed == 0 else EXIT_INVALID)


@corpus_app.command("generate")
def corpus_generate(
    directory: Annotated[Path, typer.Argument(help="Where to write the corpus files.")],
    as_json: JsonLines = False,
) -> None:
    """Write the project's corpus (deterministic: TEST ONLY seeds, fixed times): the
    published ECPA 0.1 cases byte for byte, the project's own cases, the trust-store cases.

    With --json: one object per file written, {"path", "bytes", "sha256"}.

    \b
    Example:
      ecpa corpus generate corpus/ecpa-0.1
    """
    for path in write(directory):
        if as_json:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            typer.echo(json_line({"path": str(path), "bytes": len(data), "sha256": digest}))
        else:
            typer.echo(f"wrote {show(path)}")
