"""A judging process's answer reaches ``ecpa serve`` in a shared memory segment of its own
(``ecpa.serve.judges``): written once, read once by the server, which then removes it,
also when loading fails; where the segment cannot hold it, the answer travels as bytes.
Through the executor's pipe, 8.5 MB went 64 kB at a time, each a hand-over between the
processes on a busy machine (docs/scale.md "The fleet verdict")."""

from __future__ import annotations

import pickle
import time
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path

import pytest

from ecpa.runtime import JudgedList
from ecpa.serve import judges
from tests.serve._served import served, sources_of, write_runs

ANSWER = JudgedList((), (), ("a note",) * 1000)


def _segments() -> set[str]:
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir()} if shm.is_dir() else set()


def _gone(name: str) -> bool:
    try:
        SharedMemory(name=name).close()
    except FileNotFoundError:
        return True
    return False


def test_an_answer_travels_in_a_segment_read_once_then_removed() -> None:
    sent = judges._shared(pickle.dumps(ANSWER))
    assert isinstance(sent, tuple)
    name, size = sent
    assert size == len(pickle.dumps(ANSWER))
    assert not _gone(name)
    assert judges._loaded(sent) == ANSWER
    assert _gone(name)


def test_a_segment_that_does_not_load_is_removed_too() -> None:
    for data, error in ((b"\x80\x05not a pickle", pickle.UnpicklingError),
                        (pickle.dumps({"judged": []}), TypeError)):  # fmt: skip
        sent = judges._shared(data)
        assert isinstance(sent, tuple)
        with pytest.raises(error):
            judges._loaded(sent)
        assert _gone(sent[0])


def test_what_the_segments_cannot_hold_travels_as_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    data = pickle.dumps(ANSWER)
    monkeypatch.setattr(judges, "_shm_free", lambda: 2 * len(data) - 1)
    assert judges._shared(data) == data
    assert judges._loaded(data) == ANSWER

    def broken() -> int:
        raise OSError("no /dev/shm here")

    monkeypatch.setattr(judges, "_shm_free", broken)
    assert judges._shared(data) == data


def test_a_size_that_is_not_the_segments_is_refused_and_the_segment_removed() -> None:
    sent = judges._shared(pickle.dumps(ANSWER))
    assert isinstance(sent, tuple)
    with pytest.raises(ValueError, match="expected an answer of at most"):
        judges._loaded((sent[0], 1 << 40))
    assert _gone(sent[0])


def test_judging_processes_leave_no_segment(tmp_path: Path) -> None:
    probe = judges._shared(b"x")
    assert isinstance(probe, tuple)  # this machine's answers do travel in segments
    SharedMemory(name=probe[0]).unlink()
    before = _segments()
    runs = tmp_path / "runs"
    written = write_runs(runs, 3)
    with served(sources_of(runs, written), apart=True, judges=2) as srv:
        for _ in range(3):
            srv.board.refresh()
        assert srv.get_json("/v1/launches")["launches"]
    # Another test process may judge meanwhile: its segments live milliseconds. One left
    # by these judging processes stays: in two looks half a second apart.
    first = _segments() - before
    time.sleep(0.5)
    assert not first & (_segments() - before)


def test_a_segment_without_room_is_removed_and_the_answer_sent_as_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The room is claimed before the segment is written (a write past a full tmpfs would
    kill the judging process): no room, the segment is removed and the answer is bytes."""
    data = pickle.dumps(ANSWER)
    made: list[str] = []
    real = judges.shared_memory.SharedMemory

    def noted(*args: object, **kw: object) -> object:
        segment = real(*args, **kw)  # type: ignore[arg-type]
        made.append(segment.name)
        return segment

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(judges.shared_memory, "SharedMemory", noted)
    monkeypatch.setattr(judges.os, "posix_fallocate", full)
    assert judges._shared(data) == data
    (name,) = made
    monkeypatch.undo()
    assert _gone(name)


def test_an_answer_not_loaded_after_a_failed_submission_is_removed() -> None:
    """A refresh that stops while its parts are being asked for (the server stopping) never
    loads what was already asked for: each answer's segment is removed when it arrives."""
    from concurrent.futures import Future

    sent = judges._shared(pickle.dumps(ANSWER))
    assert isinstance(sent, tuple)
    future: Future[bytes | tuple[str, int]] = Future()
    future.add_done_callback(judges._discard)
    future.set_result(sent)
    assert _gone(sent[0])
    failed: Future[bytes | tuple[str, int]] = Future()
    failed.add_done_callback(judges._discard)
    failed.set_exception(RuntimeError("stopped"))  # nothing to remove, nothing raised
