"""A fence client for the PostgreSQL load and fault tests (run as a separate process).

    python tests/_pg_worker.py DSN OUT.json FIRST COUNT SEED [GATE]

Passes nonces ``n-FIRST`` .. ``n-(FIRST+COUNT-1)``, in an order shuffled by SEED, through one
:class:`ecpa.PostgresReplayFence`, and writes what happened to each: accepted, replayed, or
an error (the server was away). After an error it waits 10 ms, so that a server restart is
met by a bounded number of errors. Writes its progress to OUT.progress as "PASSED ERRORS".

With GATE, it stops half-way, creates OUT.waiting, and goes on only once the file GATE
exists: the restart test stops the server while every client waits there, so every client
meets the server down whatever the machine's load (a fast client cannot finish first).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.stores.postgres import PostgresReplayFence


def _progress(out: str, done: int, errors: int) -> None:
    tmp = out + ".progress.tmp"
    with open(tmp, "w") as f:
        f.write(f"{done} {errors}")
    os.replace(tmp, out + ".progress")


def _wait_for(gate: str, out: str) -> None:
    open(out + ".waiting", "w").close()
    deadline = time.monotonic() + 600
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise SystemExit(f"{gate} did not appear within 600 s")
        time.sleep(0.01)


def main(dsn: str, out: str, first: int, count: int, seed: int, gate: str | None) -> None:
    nonces = [f"n-{i}" for i in range(first, first + count)]
    random.Random(seed).shuffle(nonces)
    accepted: list[str] = []
    replayed: list[str] = []
    errors: list[str] = []
    after_error: list[str] = []  # accepted after the first error: the run spanned it
    fence = None
    for done, nonce in enumerate(nonces):
        if done % 500 == 0:
            _progress(out, done, len(errors))
        if gate is not None and done == count // 2:
            _wait_for(gate, out)
        try:
            if fence is None:
                fence = PostgresReplayFence(dsn)
            fence.check_and_record(nonce, expires_at=4_000_000_000)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAYED_NONCE:
                replayed.append(nonce)
            elif exc.code is ErrorCode.REPLAY_STORE:
                errors.append(nonce)
                _progress(out, done, len(errors))
                time.sleep(0.01)
            else:
                raise
            continue
        accepted.append(nonce)
        if errors:
            after_error.append(nonce)
    doc = {"accepted": accepted, "replayed": replayed, "errors": errors, "after": after_error}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, out)


if __name__ == "__main__":
    gate = sys.argv[6] if len(sys.argv) > 6 else None
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), gate)
