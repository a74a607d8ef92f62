"""``python -m dla_plugin.drive --processes N``: a data-parallel-like launch of N scheduler
processes, the shape of vLLM with data parallelism N (one engine-core scheduler per rank).

The parent starts rank ``i`` as its own driver process (its own engine, trace seed ``seed +
i``, ``--dp-rank i``: the host binds it as ``engine-core-scheduler`` ``i``) with
``ECPA_PROCESS_ROLE=scheduler`` and ``ECPA_PROCESS_ORDINAL=i``, so each rank's observer binds
the slot ``scheduler.i`` whichever way in it is. With ``--restart``, a rank that dies (a non-zero
exit or a signal) is started again as a new process, as vLLM restarts a crashed engine
core. SIGTERM or SIGINT to the parent is passed on to every rank; it exits when all have.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

__all__ = ["run_ranks"]

_POLL_S = 0.05


def _rank_env(ordinal: int) -> dict[str, str]:
    env = dict(os.environ)
    env["ECPA_PROCESS_ROLE"] = "scheduler"
    env["ECPA_PROCESS_ORDINAL"] = str(ordinal)
    return env


def _start(argv: Sequence[str], ordinal: int, seed: int) -> subprocess.Popen[bytes]:
    command = [
        *(sys.executable, "-m", "dla_plugin.drive", *argv),
        *("--seed", str(seed + ordinal), "--dp-rank", str(ordinal)),
    ]
    return subprocess.Popen(command, env=_rank_env(ordinal))  # noqa: S603 - our own driver


def run_ranks(argv: Sequence[str], processes: int, *, seed: int, restart: bool) -> int:
    """Run ``processes`` ranks of the driver with ``argv`` (without ``--processes``,
    ``--restart`` or ``--seed``) until each has stopped; returns 0 when every rank ended
    with status 0 or was stopped by the parent, else 1."""
    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        del frame
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    ranks: dict[int, subprocess.Popen[bytes]] = {i: _start(argv, i, seed) for i in range(processes)}
    failed = False
    forwarded = 0
    while ranks:
        if len(stopping) > forwarded:
            forwarded = len(stopping)
            for proc in ranks.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
        for ordinal, proc in list(ranks.items()):
            code = proc.poll()
            if code is None:
                continue
            del ranks[ordinal]
            if code == 0 or stopping:
                continue
            print(
                f"drive: rank {ordinal} (pid {proc.pid}) ended with status {code}", file=sys.stderr
            )
            if restart:
                ranks[ordinal] = _start(argv, ordinal, seed)
                print(
                    f"drive: rank {ordinal} restarted as pid {ranks[ordinal].pid}", file=sys.stderr
                )
            else:
                failed = True
        time.sleep(_POLL_S)
    return 1 if failed else 0
