"""``ecpa serve``'s judging processes (docs/serve.md): each a spawned process of its own,
judging its part of every source's launches, listed once by the server
(:class:`~ecpa.serve.shares.Shares`: a launch stays with its process, so that process's
memory of its keys and records serves again; a new one goes where the work is least),
the parts merged into one answer. A process that died is replaced at the next refresh;
none outlives the server, even one SIGKILLed."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import select
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

from ecpa.errors import invalid_input
from ecpa.runtime import (
    JudgedList,
    judge_launches,
    list_source,
    merge_parts,
    remember_records,
)
from ecpa.serve.shares import Shares

__all__ = ["MAX_JUDGES", "Judges"]

#: The most judging processes a server runs (``ecpa serve --judges``).
MAX_JUDGES = 64


class Judges:
    """``count`` judging processes, each started at its first job."""

    def __init__(self, count: int) -> None:
        if not 1 <= count <= MAX_JUDGES:
            raise ValueError(f"expected 1 to {MAX_JUDGES} judging processes, found {count}")
        self._pools: list[ProcessPoolExecutor | None] = [None] * count
        self._lock = threading.Lock()
        self._stopped = False
        #: Each source's launches shared among the processes (by the source's name).
        self._shares: dict[str, Shares] = {}

    def __len__(self) -> int:
        return len(self._pools)

    def judge(
        self,
        dirs: Sequence[Path],
        dsn: str | None,
        *,
        limit: int,
        proc_root: Path,
        host: str | None,
        trust: Path | None,
        now: int | None = None,
    ) -> JudgedList:
        """One source's launches (one directory of ``dirs``, or the store at ``dsn``),
        listed here once (:func:`~ecpa.runtime.host.launches.list_source`), each judging
        process judging its part of that listing: the answer one
        :func:`~ecpa.runtime.host.launches.judge_launches` call with these arguments gives
        (:func:`~ecpa.runtime.host.launches.merge_parts`). ``now``: see that function.

        Raises:
            EcpaError: as :func:`~ecpa.runtime.host.launches.judge_launches`;
                ``ECPA_INVALID_INPUT`` for other than one source.
            BrokenProcessPool: a judging process died (each such one is replaced next time).
        """
        if len(dirs) + (dsn is not None) != 1:
            raise invalid_input("expected one source to judge: a directory or a store")
        listing = list_source(dirs[0] if dirs else None, dsn, limit=limit)
        parts = len(self._pools)
        with self._lock:
            shares = self._shares.setdefault(str(dirs[0]) if dirs else f"db:{dsn}", Shares(parts))
        futures: list[tuple[int, Future[bytes | tuple[str, int]]]] = []
        broken: list[int] = []
        try:
            for index, mine in enumerate(shares.split(listing.names)):
                try:
                    future = self._pool(index).submit(
                        _judged_bytes,
                        tuple(dirs),
                        dsn,
                        now=now,
                        proc_root=proc_root,
                        host=host,
                        trust=trust,
                        names=tuple(mine),
                    )
                except BrokenProcessPool:
                    broken.append(index)
                else:
                    futures.append((index, future))
        except BaseException:  # (stopped meanwhile): what was asked for is not loaded
            for _, future in futures:
                future.add_done_callback(_discard)
            raise
        answers: list[JudgedList] = []
        failure: BaseException | None = None
        for index, future in futures:  # each waited for, whatever another raised
            try:
                answers.append(_loaded(future.result()))
            except BrokenProcessPool:
                broken.append(index)
            except BaseException as exc:
                failure = failure or exc
        for index in broken:
            with self._lock:
                pool, self._pools[index] = self._pools[index], None
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        if broken:
            raise BrokenProcessPool(f"judging process(es) {sorted(broken)} of {parts} died")
        if failure is not None:
            raise failure
        merged = merge_parts(listing, answers)
        shares.judged((j.summary.launch_id, j.took_s) for j in merged.judged)
        return merged

    def _pool(self, index: int) -> ProcessPoolExecutor:
        """Judging process ``index``'s pool, started (again) when it has none.

        Raises:
            RuntimeError: after :meth:`stop` (a refresh still running then starts none).
        """
        with self._lock:
            if self._stopped:
                raise RuntimeError("ecpa serve's judging processes were stopped")
            pool = self._pools[index]
            if pool is None:
                pool = self._pools[index] = ProcessPoolExecutor(
                    1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_quiet,
                    initargs=(os.getpid(),),
                )
            return pool

    def stop(self) -> None:
        """End every judging process (waiting for each); none is started after."""
        with self._lock:
            self._stopped = True
            pools, self._pools = self._pools, [None] * len(self._pools)
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then as it was (whatever happens inside).
    What is made inside is many objects, few of them garbage and none in cycles that need
    collecting at once: a judgement, its answer loaded, a refresh's entries (the board).
    Collected while made, each full collection went over every object the process holds
    (its memories, the snapshot served) again: docs/scale.md "The fleet verdict"."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _judged_bytes(*args: Any, **kw: Any) -> bytes | tuple[str, int]:
    """:func:`~ecpa.runtime.host.launches.judge_launches`'s answer, judged and pickled
    here (the judging process, its collector paused), sent as :func:`_shared` says, for
    :func:`_loaded` to load in the server."""
    with collector_paused():
        data = pickle.dumps(judge_launches(*args, **kw), protocol=pickle.HIGHEST_PROTOCOL)
    return _shared(data)


def _shm_free() -> int:
    """Bytes free where shared memory segments live (Linux: the tmpfs at /dev/shm).

    Raises:
        OSError: there is none.
    """
    return shutil.disk_usage("/dev/shm").free  # noqa: S108 (its free space, read only)


def _shared(data: bytes) -> bytes | tuple[str, int]:
    """``data`` in a shared memory segment of its own, as (its name, the size): the server
    reads it at once and removes it (:func:`_loaded`). Through the executor's pipe, an
    answer of 8.5 MB crossed 64 kB at a time, each a hand-over between two processes on a
    busy machine: 0.1 s. ``data`` itself where no segment can hold it twice over (none,
    or a small /dev/shm: a segment written past its tmpfs's room would kill the process).
    A segment the server never reads (it died first) is removed by multiprocessing's
    resource tracker when the server and its judging processes are gone."""
    try:
        if _shm_free() < 2 * len(data):
            return data
        segment = shared_memory.SharedMemory(create=True, size=max(1, len(data)))
    except OSError:
        return data
    try:
        fd = getattr(segment, "_fd", -1)  # (POSIX: its file, to claim the room first)
        if fd >= 0:  # ENOSPC now, where a write past the tmpfs's room would be SIGBUS
            os.posix_fallocate(fd, 0, max(1, len(data)))
        _buffer(segment)[: len(data)] = data
        return segment.name, len(data)
    except OSError:  # no room after all (another judging process took it): as bytes
        segment.unlink()
        return data
    except BaseException:
        segment.unlink()
        raise
    finally:
        segment.close()


def _loaded(sent: bytes | tuple[str, int]) -> JudgedList:
    """A judging process's answer (:func:`_judged_bytes`, from a process this server
    started: the trust the executor's own pickles have), loaded with the collector paused
    (300,000 objects for 5,000 slots, none of them garbage); its segment, if it came in
    one, removed whatever happens.

    Raises:
        ValueError: a size larger than its segment's.
        TypeError: it is not a judging process's answer.
    """
    if isinstance(sent, bytes):
        return _answer(sent)
    name, size = sent
    segment = shared_memory.SharedMemory(name=name)
    try:
        segment.unlink()  # first: whatever happens below, it is gone once closed
        if not 0 <= size <= segment.size:
            raise ValueError(f"expected an answer of at most {segment.size} bytes, found {size}")
        view = _buffer(segment)[:size]
        try:
            return _answer(view)
        finally:
            view.release()
    finally:
        segment.close()


def _discard(future: Future[bytes | tuple[str, int]]) -> None:
    """The segment of an answer that will not be loaded (its refresh failed before),
    removed when the answer is there."""
    if future.cancelled() or future.exception() is not None:
        return
    sent = future.result()
    if isinstance(sent, tuple):
        with contextlib.suppress(OSError):
            segment = shared_memory.SharedMemory(name=sent[0])
            segment.unlink()
            segment.close()


def _buffer(segment: shared_memory.SharedMemory) -> memoryview:
    buf = segment.buf
    if buf is None:  # (closed: never here)
        raise ValueError(f"shared memory segment {segment.name} is closed")
    return buf


def _answer(data: bytes | memoryview) -> JudgedList:
    with collector_paused():
        answer = pickle.loads(data)  # noqa: S301 (bytes of this server's own child)
    if not isinstance(answer, JudgedList):
        raise TypeError(f"expected a judging process's JudgedList, found {type(answer).__name__}")
    return answer


def _quiet(server: int) -> None:
    """The judging process leaves SIGINT to ``ecpa serve`` (a terminal's Ctrl-C reaches
    the whole group): the server stops it when it stops. And it never outlives the server
    ``server`` (its pid), even one SIGKILLed, which cannot stop it: a daemon thread ends
    the process the moment the server is gone (:func:`_end_with`). It judges the same
    launches every refresh: it remembers a verified record a slot and more
    (:func:`~ecpa.runtime.judge.records.remember_records`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    remember_records()
    threading.Thread(
        target=_end_with, args=(server,), name="ecpa-serve-parent", daemon=True
    ).start()


def _end_with(server: int) -> None:
    """Exit (status 1, at once: nothing of the judging is worth keeping) when process
    ``server``, this one's parent, ends: waiting on a pidfd where there is one (Linux 5.3),
    else looking at the parent pid twice a second. The parent is checked after the pidfd is
    open, so a server that died before, its pid reused, is not watched in its place."""
    fd: int | None = None
    try:
        fd = os.pidfd_open(server)
    except (AttributeError, OSError):  # not Linux, an old kernel, or the server is gone
        fd = None
    try:
        if fd is not None and os.getppid() == server:
            select.select([fd], [], [])  # readable once the process has ended
        while os.getppid() == server:
            time.sleep(0.5)
    finally:
        os._exit(1)
