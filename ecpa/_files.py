"""Small file helpers shared by the library and the command line."""

from __future__ import annotations

from pathlib import Path

from ecpa.errors import EcpaError, ErrorCode


def read_bounded(path: Path, limit: int, code: ErrorCode) -> bytes:
    """The whole file at ``path`` if it holds at most ``limit`` bytes; else ``EcpaError(code)``
    naming what was expected and found. Never reads more than ``limit + 1`` bytes."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise EcpaError(
            code, f"expected a readable file at {path}, found: {exc.strerror}"
        ) from None
    if len(data) > limit:
        raise EcpaError(code, f"expected at most {limit} bytes in {path}, found more")
    return data


def write_generated(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write generated text files (schemas, corpus) into ``directory``; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
