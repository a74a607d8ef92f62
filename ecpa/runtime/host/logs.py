"""A 0.2 launch's process logs as ``ecpa status`` reads them: each opened once, relative to
its directory, never through a symlink; each decided from its end
(:mod:`ecpa.runtime.judge.sources`); its full history walked forward from the last checkpoint within
a time budget (:mod:`ecpa.runtime.judge.history`). The cost of a status is the logs' ends plus
the budget, whatever the launch's age."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ecpa._files import describe_mode
from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.judge import history
from ecpa.runtime.judge.context import Judgement
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.judge.sources import MAX_LINES, judge_sources, newest_lines
from ecpa.runtime.judge.stream import Stream
from ecpa.runtime.model.enroll import LOG_NAME
from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH, LogLine
from ecpa.runtime.model.host_journal import JOURNAL_DIR

__all__ = ["MAX_LOGS", "FileLog", "ProcessLogs", "judge_logs", "open_process_logs"]

#: A launch has at most this many process logs read (a directory flooded with files is
#: reported, not read to the end).
MAX_LOGS = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class ProcessLogs:
    """The opened logs of one launch (close them with :meth:`close`)."""

    dir_fd: int | None = None
    fds: dict[str, int] = field(default_factory=dict)
    skipped: list[Reason] = field(default_factory=list)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


def open_process_logs(directory: Path, *, quiet: str | None = None) -> ProcessLogs:
    """Each ``<kid>.jsonl`` in ``directory``, opened relative to it (the directory opened
    once, ``O_NOFOLLOW``), regular files only; what was skipped, with the reason (names
    beginning with ``quiet`` skipped without one: the host journals' refusal logs).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when the directory exists but cannot be opened.
    """
    logs = ProcessLogs()
    try:
        logs.dir_fd = os.open(directory, _DIR_FLAGS)
    except FileNotFoundError:
        text = f"no evidence directory {directory} yet"
        logs.skipped.append(Reason(ReasonCode.NO_EVIDENCE_DIR, text))
        return logs
    except OSError as exc:
        detail = f"expected an evidence directory at {directory}, found: {exc.strerror}"
        raise EcpaError(ErrorCode.INVALID_INPUT, detail) from None
    for name in sorted(os.listdir(logs.dir_fd)):
        if not LOG_NAME.fullmatch(name):
            said = name.startswith(".") or name == JOURNAL_DIR  # the host's journals' room
            if not said and not (quiet is not None and name.startswith(quiet)):
                text = (
                    f"file {name!r}: not a process log "
                    "(<role>.<ordinal>-<pid>-<ticks>.jsonl), skipped"
                )
                logs.skipped.append(Reason(ReasonCode.SKIPPED, text))
            continue
        if len(logs.fds) >= MAX_LOGS:
            text = f"more than {MAX_LOGS} process logs: the rest not read"
            logs.skipped.append(Reason(ReasonCode.SKIPPED, text))
            break
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=logs.dir_fd)
        except OSError as exc:
            text = f"file {name!r}: not readable as a log ({exc.strerror}), skipped"
            logs.skipped.append(Reason(ReasonCode.SKIPPED, text))
            continue
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            text = f"file {name!r}: {describe_mode(mode)}, not a log, skipped"
            logs.skipped.append(Reason(ReasonCode.SKIPPED, text))
            continue
        os.set_blocking(fd, True)
        logs.fds[name] = fd
    return logs


@dataclass
class FileLog:
    """A process log file, opened relative to its directory, with its checkpoint beside it."""

    dir_fd: int
    name: str
    fd: int
    #: The trust the walk judges under (:func:`~ecpa.runtime.judge.history.trust_basis`).
    basis: str = ""

    def load(self, launch_id: str, now: int) -> history.Checkpoint:
        return history.load(self.dir_fd, self.name, self.fd, launch_id, now, self.basis)

    def end(self) -> tuple[int, bytes]:
        size = os.fstat(self.fd).st_size
        end = history.complete_end(self.fd, size)
        if size <= end:
            return end, b""
        return end, os.pread(self.fd, min(size - end, MAX_RECORD_LENGTH + 1), end)

    def advance(
        self,
        ck: history.Checkpoint,
        walk: Callable[[Iterator[LogLine], Stream], None],
        *,
        end: int,
        deadline: float | None,
    ) -> bool:
        return history.advance(self.fd, ck, walk, end=end, deadline=deadline)

    def newest_lines(self, end: int, limit: int = MAX_LINES) -> list[tuple[int, bytes]]:
        return newest_lines(self.fd, end, max_lines=limit)

    def line_at(self, offset: int) -> bytes | None:
        # The walk may record a line's start before blank lines that precede it (read_log
        # skips them): pass over up to 64 KiB of them to the line itself.
        raw = os.pread(self.fd, MAX_RECORD_LENGTH + 2 + 65536, offset)
        body = raw.lstrip(b" \t\r\n")
        if len(raw) - len(body) > 65536:
            return None
        return body.split(b"\n", 1)[0].rstrip(b"\r")

    def save(self, ck: history.Checkpoint) -> str | None:
        return history.save(self.dir_fd, self.name, ck)


def judge_logs(logs: ProcessLogs, judgement: Judgement) -> tuple[dict[str, Stream], list[Reason]]:
    """:func:`judge_sources` over the opened log files of a launch directory, under the
    ``judgement`` (its trust store also the basis each checkpoint is kept under).

    Raises:
        EcpaError: ``ECPA_REPLAY_STORE`` when the fence's store fails.
    """
    assert logs.dir_fd is not None or not logs.fds
    basis = history.trust_basis(judgement.trust_store)
    sources = [FileLog(logs.dir_fd, name, fd, basis) for name, fd in logs.fds.items()]  # type: ignore[arg-type]
    return judge_sources(sources, judgement)
