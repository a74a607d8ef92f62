"""Small file helpers shared by the library and the command line.

Every file the tools read as evidence, trust, launch or key goes through :func:`open_regular`:
opened without following a symlink (``O_NOFOLLOW``), without blocking (``O_NONBLOCK``: a FIFO
with no writer would block ``open`` forever), checked to be a regular file (a FIFO, a device
such as ``/dev/zero``, a socket or a directory is refused), and read with a bound. Every file
the tools write whole (keys, signed output, a launch directory's files, trust stores, status
checkpoints) goes through :func:`write_file`: one atomic writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ecpa.errors import EcpaError, ErrorCode

__all__ = [
    "MAX_INPUT_BYTES",
    "check_private_dir",
    "describe_mode",
    "open_regular",
    "private_enough",
    "read_bounded",
    "read_input",
    "read_private",
    "safe_target",
    "write_file",
    "write_generated",
    "write_new",
]

#: The most the tools read of one input given whole: a bundle, statement, ``.jws``, key or
#: corpus file, or standard input.
MAX_INPUT_BYTES = 64 * 1024 * 1024

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def describe_mode(mode: int) -> str:
    """What kind of file ``st_mode`` names, in words ("a FIFO", "a directory", ...)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return f"a file of mode {stat.filemode(mode)}"


def safe_target(name: str, code: ErrorCode) -> str:
    """Where the symlink ``name`` leads, if following it is safe (ssh's StrictModes, judged
    on the path, not the link): the link's own directories and every component of the
    path it resolves to (each directory and the target) are owned by root or this user and
    not writable by group or others (a sticky directory such as ``/tmp`` may be: its
    entries on the path are root's or ours all the same). A Kubernetes ConfigMap or Secret
    mount (``trust.json -> ..data/trust.json``, in a root-owned read-only directory) passes;
    a link in, or into, a directory others may write does not.

    Raises:
        EcpaError: ``code`` naming the component that failed, its owner and its mode.
    """
    me = os.geteuid()
    real = os.path.realpath(name)
    parts: list[str] = []
    for start in (os.path.dirname(os.path.abspath(name)), real):
        current = start
        while current not in parts:
            parts.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    for part in parts:
        try:
            st = os.stat(part)
        except OSError as exc:
            raise EcpaError(
                code, f"expected {part} (on the path of the symlink {name}), found: {exc.strerror}"
            ) from None
        mode = stat.S_IMODE(st.st_mode)
        sticky = stat.S_ISDIR(st.st_mode) and mode & stat.S_ISVTX
        if st.st_uid not in (0, me) or (mode & 0o022 and not sticky):
            raise EcpaError(
                code,
                f"expected the symlink {name} to lead only through files and directories "
                f"owned by root or uid {me} and not writable by group or others (not "
                f"followed), found {part} with uid {st.st_uid} and mode {mode:04o}",
            )
    return real


def open_regular(
    path: str | os.PathLike[str],
    code: ErrorCode,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file and not a symlink. With
    ``dir_fd``, the file named ``path``'s last part in the directory open as ``dir_fd``,
    wherever that directory is now (``path`` then names it in messages). With ``follow``
    (an input the user names: a key, a trust store, evidence), a symlink is followed when
    :func:`safe_target` says it is safe.

    Raises:
        EcpaError: ``code``, naming the path and what was found (missing, a symlink, a FIFO,
            a device, a directory, unreadable, a name with a NUL byte).
    """
    name = os.fspath(path)
    if "\0" in str(name):
        raise EcpaError(code, f"expected a file name without NUL bytes, found {name!r}")
    if follow and dir_fd is None and os.path.islink(name):
        real = safe_target(str(name), code)
        try:
            return open_regular(real, code)
        except EcpaError as exc:
            raise EcpaError(code, f"{exc.detail} (through the symlink {name})") from None
    try:
        fd = os.open(Path(name).name if dir_fd is not None else name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            found = "a symlink (not followed)"
        elif exc.errno == errno.ENXIO:  # a FIFO or socket nobody serves
            found = "a FIFO or socket"
        else:
            found = exc.strerror or str(exc)
        raise EcpaError(
            code, f"expected a readable regular file at {name}, found: {found}"
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise EcpaError(code, f"expected a regular file at {name}, found {describe_mode(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_private_dir(path: str | os.PathLike[str], code: ErrorCode, *, what: str) -> None:
    """Refuse ``path`` unless it is a directory (not a symlink) owned by this user that
    neither group nor others may write (RUNTIME.md "Process keys"; like ssh's StrictModes):
    whoever may write there may replace what is read from it.

    Raises:
        EcpaError: ``code`` naming the path, its owner and its mode.
    """
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise EcpaError(code, f"expected the {what} {path}, found: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        found = describe_mode(st.st_mode)
        raise EcpaError(code, f"expected the {what} {path} to be a directory, found {found}")
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid() or mode & 0o022:
        raise EcpaError(
            code,
            f"expected the {what} {path} owned by uid {os.geteuid()} and not writable by "
            f"group or others, found uid {st.st_uid} and mode {mode:04o}",
        )
    check_ancestors(path, code, what=what)


def check_ancestors(path: str | os.PathLike[str], code: ErrorCode, *, what: str) -> None:
    """Refuse ``path`` unless every directory above it (its real path, up to ``/``) is owned
    by root or this user and not writable by group or others, or is sticky (``/tmp``), as
    ssh's StrictModes judges a path (RUNTIME.md "Round 3", "Directories"): whoever may
    rename an ancestor may swap the whole tree under a running launch.

    Raises:
        EcpaError: ``code`` naming the first ancestor that fails, its owner and its mode.
    """
    me = os.geteuid()
    # The path as given (a symlink's own directory counts: whoever may write it may point
    # the link elsewhere) and the path it resolves to.
    seen: set[str] = set()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        _check_up(os.path.dirname(start), path, code, what, me, seen)


def _check_up(
    current: str, path: object, code: ErrorCode, what: str, me: int, seen: set[str]
) -> None:
    while current not in seen:
        seen.add(current)
        try:
            st = os.stat(current)
        except OSError as exc:
            raise EcpaError(
                code,
                f"expected the directories above the {what} readable, {current}: {exc.strerror}",
            ) from None
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (0, me) or (mode & 0o022 and not mode & stat.S_ISVTX):
            raise EcpaError(
                code,
                f"expected every directory above the {what} {path} owned by root or uid {me} "
                "and not writable by group or others unless sticky, found "
                f"{current} with uid {st.st_uid} and mode {mode:04o}",
            )
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def read_bounded(
    path: Path,
    limit: int,
    code: ErrorCode,
    *,
    dir_fd: int | None = None,
    follow: bool = False,
    check: Callable[[os.stat_result], None] | None = None,
) -> bytes:
    """The whole regular file at ``path`` (see :func:`open_regular`, ``dir_fd`` as there) if
    it holds at most ``limit`` bytes; else ``EcpaError(code)`` naming what was expected and
    found. Never reads more than ``limit + 1`` bytes. ``check`` is given the file's status
    once it is open, before a byte is read (it raises to refuse the file)."""
    with open_regular(path, code, dir_fd=dir_fd, follow=follow) as fh:
        if check is not None:
            check(os.fstat(fh.fileno()))
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise EcpaError(
                code, f"expected a readable file at {path}, found: {exc.strerror}"
            ) from None
    if len(data) > limit:
        raise EcpaError(code, f"expected at most {limit} bytes in {path}, found more")
    return data


def private_enough(st: os.stat_result) -> bool:
    """Whether a secret's file is private: this user's, with no access for group or others;
    or root's, readable by a group of ours and by nobody else (a Kubernetes Secret mounted
    with ``fsGroup``)."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == os.geteuid() and not mode & 0o077:
        return True
    return (
        st.st_uid == 0 != os.geteuid()
        and st.st_gid in {os.getegid(), *os.getgroups()}
        and not mode & 0o037
    )


def read_private(path: Path, limit: int, code: ErrorCode, what: str) -> bytes:
    """A secret's whole file (a private key, a passphrase, a token, a PIN), read as
    :func:`read_bounded` reads, refused unless :func:`private_enough`: whoever else may read
    it holds the secret too. Raises ``EcpaError(code)`` naming the file, its owner and mode
    (never its contents)."""

    def private(st: os.stat_result) -> None:
        if not private_enough(st):
            raise EcpaError(
                code,
                f"expected {what} {path} owned by uid {os.geteuid()} with mode 0600 (or "
                "root's, readable only by a group of ours: a Kubernetes Secret), found uid "
                f"{st.st_uid}, gid {st.st_gid} and mode {stat.S_IMODE(st.st_mode):04o}",
            )

    return read_bounded(path, limit, code, follow=True, check=private)


def read_input(path: Path) -> bytes:
    """A whole input file given on the command line (:func:`read_bounded`, at most
    :data:`MAX_INPUT_BYTES`).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming what was expected and found.
    """
    return read_bounded(path, MAX_INPUT_BYTES, ErrorCode.INVALID_INPUT, follow=True)


def write_generated(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write generated text files (schemas, corpus) into ``directory``; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def write_new(path: Path, data: bytes, *, mode: int = 0o644, force: bool = False) -> None:
    """``data`` as the file ``path`` a user named (keys, signed output), whole or not at all
    (:func:`write_file`); never through a symlink at ``path``, never over an existing file
    unless ``force``.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the path and what was found there.
    """
    exists = f"expected {path} not to exist (use --force to replace it), found it"
    if path.is_symlink():
        raise EcpaError(
            ErrorCode.INVALID_INPUT, f"expected a regular file path at {path}, found a symlink"
        )
    if path.exists() and not force:
        raise EcpaError(ErrorCode.INVALID_INPUT, exists)
    try:
        write_file(path, data, mode=mode, replace=force)
    except FileExistsError:
        raise EcpaError(ErrorCode.INVALID_INPUT, exists) from None
    except OSError as exc:
        raise EcpaError(
            ErrorCode.INVALID_INPUT, f"expected to write {path}, found: {exc.strerror}"
        ) from None


def write_file(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o600,
    replace: bool = True,
    dir_fd: int | None = None,
    sync: bool = True,
) -> None:
    """Write ``data`` as the file ``path``, whole or not at all: a temporary file beside it
    (created new, never through a symlink, ``mode`` from the first byte whatever the umask),
    written, then renamed over ``path`` (``replace``) or linked to it (not ``replace``: never
    over an existing file, nor one that appears meanwhile). With ``sync`` the file and then
    its directory are synced, so a crash leaves the old file or the new one. With ``dir_fd``,
    the file is ``path``'s last part in the directory open as ``dir_fd``, wherever that
    directory is now (``path`` then only names it).

    Raises:
        OSError: as the system reports it (the caller says what it was writing, and why);
            the temporary file is removed.
    """
    name = path.name
    own = dir_fd is None
    directory = (
        dir_fd
        if dir_fd is not None
        else os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    )
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, mode, dir_fd=directory)
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
        else:
            os.link(tmp, name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            os.unlink(tmp, dir_fd=directory)
        if sync:
            os.fsync(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise
    finally:
        if own:
            os.close(directory)
