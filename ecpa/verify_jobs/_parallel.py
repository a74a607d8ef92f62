"""``ecpa verify --jobs N``: the same results as one process, from N worker processes.

The main process reads the inputs, streaming, and cuts them into *units*: a chunk of whole
log lines (at most :data:`CHUNK_LINES` lines or about :data:`CHUNK_BYTES` bytes), a group of
``.jws``/bundle files, or a bundle from standard input. Workers parse and verify a unit and
send back its output lines already rendered. At most ``2 N + 2`` units are in flight, and
the main process prints their results strictly in input order, so memory stays bounded by the
window whatever the size of a log, and the output is byte for byte what one process prints.

The replay fence is the last check (PROFILE §3 step 25), and it must see nonces in input
order and only from evidence that passed every other check. So workers verify *without*
the fence and return each accepted statement's nonce; the main process consults the fence in
order and turns an item into ``REPLAYED_NONCE`` (or whatever the fence raises) there: the
codes are exactly those of one process.

Each worker gets the trust store, policy, binding and time once, at start (initializer),
never per unit.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import threading
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.trust import TrustStore, TrustStoreDocument
from ecpa.profile.verify import Binding, Policy, explain_signature_failure
from ecpa.runtime import ReplayFence, issued_at_of, parse_record, read_log, verify_evidence
from ecpa.verify_jobs._inputs import Item, file_item, no_records, torn_message
from ecpa.verify_jobs._results import Advance, Echo, Tally, render_result
from ecpa.verify_jobs._units import (
    Batch,
    Bundle,
    Fenced,
    Files,
    LogChunk,
    LogEnd,
    LogStart,
    Sizes,
    Unit,
    slots,
    stopped,
)

__all__ = ["CHUNK_BYTES", "CHUNK_LINES", "VerifyConfig", "verify_with_jobs"]

CHUNK_LINES = 512
CHUNK_BYTES = 1 << 20
#: Log bytes in flight at most, about: many workers get smaller chunks (not below 64 KiB).
WINDOW_BYTES = 32 << 20
FILES_PER_UNIT = 64


@dataclass(frozen=True)
class VerifyConfig:
    """What every item is verified against; picklable, sent to each worker once."""

    trust: TrustStoreDocument
    #: None: each item as of its own ``issued_at`` (``--at-issue``).
    now: int | None
    policy: Policy
    binding: Binding | None
    as_json: bool
    fenced: bool  # the main process has a replay fence: return the nonce of each accepted item


# --- the worker side ----------------------------------------------------------------------


class _Verifier:
    """Verifies units; one per worker process, built once from the :class:`VerifyConfig`."""

    def __init__(self, config: VerifyConfig) -> None:
        self.config = config
        self.store = TrustStore(config.trust)

    def run(self, unit: Unit) -> Batch:
        batch = Batch([], 0, 0, [])
        try:
            if isinstance(unit, LogChunk):
                return self._chunk(unit, batch)
            if isinstance(unit, Bundle):
                try:
                    item = Item(unit.name, None, parse_record(unit.data), None)
                except EcpaError as exc:
                    item = Item(unit.name, None, None, exc)
                return self._item(item, batch)
            for spec in unit.specs:
                batch = self._item(file_item(spec, unit.payload), batch)
        except Exception as exc:  # stop there, as one process does; reported in order
            return stopped(exc, batch)
        return batch

    def _chunk(self, chunk: LogChunk, batch: Batch) -> Batch:
        # read_log sees exactly the bytes it would see in the file, so blank lines, "\r\n",
        # over-long lines and a torn last line come out as they do without --jobs.
        for line in read_log(io.BytesIO(chunk.data)):
            number = chunk.first_line - 1 + line.number
            if line.torn:
                return batch._replace(torn=torn_message(chunk.name, number, line.error))
            batch = self._item(Item(chunk.name, number, line.evidence, line.error), batch)
        return batch

    def _item(self, item: Item, batch: Batch) -> Batch:
        config = self.config
        error, statement, at = item.error, None, None
        if item.evidence is not None and config.now is None:
            at = issued_at_of(item.evidence.payload) or 0
        if item.evidence is not None:
            try:
                verified = verify_evidence(
                    item.evidence,
                    self.store,
                    now=config.now if config.now is not None else at or 0,
                    policy=config.policy,
                    binding=config.binding,
                    replay=None,  # the main process applies the fence, in order
                )
                statement = verified.statement.to_dict()
            except EcpaError as exc:
                ev = item.evidence
                error = explain_signature_failure(exc, ev.payload, ev.detached_jws, self.store)
            else:
                if config.fenced:
                    st = verified.statement
                    batch.fenced.append(
                        Fenced(
                            len(batch.texts),
                            st.challenge_nonce,
                            st.expires_at,
                            item.input,
                            item.line,
                        )
                    )
        text = render_result(
            item.input, item.line, error, statement, config.as_json, verified_at=at
        )
        if text is not None:
            batch.texts.append(text)
        return batch._replace(items=batch.items + 1, failed=batch.failed + (error is not None))


_WORKER: _Verifier | None = None


def _watch_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is not None:
        parent.join()  # returns when the main process is gone (killed, or its pipe closed)
        os._exit(1)


def _start_worker(config: VerifyConfig) -> None:
    global _WORKER
    # Ctrl-C reaches the whole process group: the main process handles it and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, name="ecpa-parent-watch", daemon=True).start()
    _WORKER = _Verifier(config)


def _run_unit(unit: Unit) -> Batch:
    assert _WORKER is not None, "worker not initialized"
    return _WORKER.run(unit)


# --- the main process: the window and the output -----------------------------------------


def _raise_crash(name: str, text: str) -> None:
    # The worker's exception, under its own type name, for the one "internal error" line.
    raise cast(type[Exception], type(name, (Exception,), {}))(text)


class _Printer:
    """Prints results in order, applying the replay fence; remembers whether any failed."""

    def __init__(
        self, fence: ReplayFence | None, as_json: bool, echo: Echo, advance: Advance | None
    ) -> None:
        self.fence = fence
        self.as_json = as_json
        self.echo = echo
        self.advance = advance
        self.items = self.failed = 0
        self.log_count = 0

    def slot(self, slot: LogStart | LogEnd | Batch) -> None:
        if isinstance(slot, LogStart):
            self.log_count = 0
        elif isinstance(slot, LogEnd):
            if self.log_count == 0:
                self.items, self.failed = self.items + 1, self.failed + 1
                text = render_result(slot.name, None, no_records(), None, self.as_json)
                self.echo(text or "")  # a failed item always has a line
        else:
            self.batch(slot)

    def batch(self, batch: Batch) -> None:
        texts = batch.texts
        for item in batch.fenced:
            assert self.fence is not None
            try:  # PROFILE §3 step 25, last, in input order
                self.fence.check_and_record(item.nonce, expires_at=item.expires_at)
            except EcpaError as exc:
                if exc.code is ErrorCode.REPLAY_STORE:
                    raise  # the fence itself failed: the command stops, exit 2
                self.failed += 1
                text = render_result(item.source, item.line, exc, None, self.as_json)
                texts[item.position] = text if text is not None else texts[item.position]
        self.failed += batch.failed
        self.items += batch.items
        self.log_count += batch.items
        if self.advance is not None and batch.items:
            self.advance(batch.items)
        if texts:
            self.echo("\n".join(texts))
        if batch.torn is not None:
            self.echo(batch.torn, err=True)
        if batch.stop is not None:
            raise batch.stop
        if batch.crash is not None:
            _raise_crash(*batch.crash)


def verify_with_jobs(
    specs: list[str],
    payload: Path | None,
    *,
    jobs: int,
    config: VerifyConfig,
    fence: ReplayFence | None,
    echo: Echo,
    advance: Advance | None = None,
) -> Tally:
    """Verify every EVIDENCE argument with ``jobs`` worker processes and print the results
    with ``echo`` exactly as one process does; return how many passed and failed (told to
    ``advance`` as they come).

    Raises:
        EcpaError: as one process does, after printing every result before it: an input
            that is not evidence (exit 2).
    """
    printer = _Printer(fence, config.as_json, echo, advance)
    limit = 2 * jobs + 2  # units in flight: every worker busy, one more waiting each
    chunk = min(CHUNK_BYTES, max(64 << 10, WINDOW_BYTES // limit))
    units = slots(specs, payload, Sizes(CHUNK_LINES, chunk, FILES_PER_UNIT, config.as_json))
    window: deque[Future[Batch] | LogStart | LogEnd | Batch] = deque()
    exhausted = False
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker, initargs=(config,))
    try:
        while True:
            while not exhausted and len(window) < limit:
                try:
                    slot = next(units)
                except StopIteration:
                    exhausted = True
                except Exception as exc:  # reading failed: report it after what came before
                    exhausted = True
                    window.append(stopped(exc))
                else:
                    if isinstance(slot, (LogChunk, Files, Bundle)):
                        window.append(pool.submit(_run_unit, slot))
                    else:
                        window.append(slot)
            if not window:
                break
            head = window.popleft()
            printer.slot(head.result() if isinstance(head, Future) else head)
    finally:
        units.close()
        pool.shutdown(wait=True, cancel_futures=True)
    return Tally(printer.items - printer.failed, printer.failed)
