"""A fence client for the PostgreSQL load and fault tests (run as a separate process).

    python tests/_pg_worker.py DSN OUT.json FIRST COUNT SEED

Passes nonces ``n-FIRST`` .. ``n-(FIRST+COUNT-1)``, in an order shuffled by SEED, through one
:class:`ecpa.PostgresReplayFence`, and writes what happened to each: accepted, replayed, or
an error (the server was away). After an error it waits 10 ms, so that a server restart is
met by a bounded number of errors. Writes its progress (nonces passed) to OUT.progress.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from ecpa.errors import EcpaError, ErrorCode
from ecpa.runtime.postgres import PostgresReplayFence


def main(dsn: str, out: str, first: int, count: int, seed: int) -> None:
    nonces = [f"n-{i}" for i in range(first, first + count)]
    random.Random(seed).shuffle(nonces)
    accepted: list[str] = []
    replayed: list[str] = []
    errors: list[str] = []
    after_error: list[str] = []  # accepted after the first error: the run spanned it
    fence = None
    for done, nonce in enumerate(nonces):
        if done % 500 == 0:
            with open(out + ".progress", "w") as f:
                f.write(str(done))
        try:
            if fence is None:
                fence = PostgresReplayFence(dsn)
            fence.check_and_record(nonce, expires_at=4_000_000_000)
        except EcpaError as exc:
            if exc.code is ErrorCode.REPLAYED_NONCE:
                replayed.append(nonce)
            elif exc.code is ErrorCode.REPLAY_STORE:
                errors.append(nonce)
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
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
