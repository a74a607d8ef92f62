"""``python -m bench.instructions``: what a call costs in CPU instructions, counted by
valgrind's callgrind, which repeats from run to run on a shared, noisy machine where
seconds drift by a third.

Each row runs its call in a fresh interpreter under ``valgrind --tool=callgrind`` twice,
``N`` and ``2N`` times after the same set-up and warm-up; the difference of the two totals
divided by ``N`` is the instructions of one call (start-up, imports and set-up cancel out).
Rows, on the corpus case ``positive-ascii`` (``bench.micro.Case``):

* ``ecpa.verify`` (every check of PROFILE.md) over one bare libsodium verify of the same
  signing input (PyNaCl's ``nacl.bindings.crypto_sign_open`` on the signature and message
  joined beforehand: the thinnest public call into libsodium from Python);
* ``ecpa.sign`` over one bare libsodium sign (``nacl.bindings.crypto_sign``, the 64-byte
  secret key prepared once);
* ``ecpa.canonicalize`` over ``rfc8785.dumps`` (same bytes);
* a record of an evidence log as ``ecpa verify`` judges it (``--jobs 1``: read the line,
  parse the record, verify, print its result line) over one bare libsodium verify.

Targets: verify <= 1.20x (stretch 1.10x), sign <= 1.30x (stretch 1.15x), a log record
>= 0.75 of libsodium's rate (<= 1.33x its instructions). Without valgrind the rows say how
to install it (Debian: ``apt install valgrind``). Beside each row, the wall-clock time of
one call of each side and their ratio (median of 7 rounds, outside valgrind): on a shared
machine these drift from run to run, the instruction counts do not.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.launchdir import hermetic_config

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Spec:
    """A row: ours and the baseline, by name in :func:`_calls`, and the target ratio."""

    name: str
    baseline: str
    ours: str
    base: str
    target: float
    stretch: float | None


SPECS = [
    Spec("ecpa.verify", "libsodium verify", "verify", "nacl_verify", 1.20, 1.10),
    Spec("ecpa.sign", "libsodium sign", "sign", "nacl_sign", 1.30, 1.15),
    Spec("ecpa.canonicalize", "rfc8785.dumps", "canonicalize", "rfc8785", 0.25, None),
    Spec(
        "ecpa verify, a log record", "libsodium verify", "log_record", "nacl_verify", 1 / 0.75, None
    ),
]


def _calls() -> dict[str, Callable[[], object]]:
    """Every side of every row, set up (outside what is counted)."""
    import nacl.bindings as sodium
    import rfc8785

    import ecpa
    from bench.micro import Case

    case = Case()
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    pk = case.public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    _, sk = sodium.crypto_sign_seed_keypair(bytes(range(32)))
    signed_message = case.signature + case.signing_input  # prepared once: the floor
    calls: dict[str, Callable[[], object]] = {
        "verify": case.verify,
        "nacl_verify": lambda: sodium.crypto_sign_open(signed_message, pk),
        "sign": lambda: ecpa.sign(case.statement, case.key),
        "nacl_sign": lambda: sodium.crypto_sign(case.signing_input, sk),
        "canonicalize": lambda: ecpa.canonicalize(case.statement),
        "rfc8785": lambda: rfc8785.dumps(case.statement),
    }
    assert ecpa.canonicalize(case.statement) == rfc8785.dumps(case.statement)
    return calls


def _write_log(directory: Path, n: int) -> None:
    """``log-N.jsonl`` (N records of the case) and ``trust.json`` in ``directory``."""
    import json

    from bench.micro import Case
    from ecpa.profile.b64 import b64u_encode

    case = Case()
    line = json.dumps(
        {"payload_b64": b64u_encode(case.payload), "detached_jws": case.jws},
        separators=(",", ":"),
    )
    (directory / f"log-{n}.jsonl").write_text((line + "\n") * n)
    (directory / "trust.json").write_text(json.dumps(case.store.to_dict()))
    (directory / "now").write_text(str(case.now))


def _log_run(n: int) -> None:
    """``ecpa verify log-N.jsonl --jobs 1`` in this process, its output discarded."""
    import contextlib

    from ecpa.cli import main

    directory = Path(os.environ["ECPA_CG_LOGS"])
    args = ["verify", str(directory / f"log-{n}.jsonl"), "--trust", str(directory / "trust.json")]
    args += ["--now", (directory / "now").read_text(), "--jobs", "1"]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        status = main(args)
    assert status == 0, status


def _wall_driver(side: str, n: int) -> None:
    """Print the median seconds of one call of ``side`` over 7 rounds of ``n`` calls (a
    log row: over 7 runs of the command on a log of ``n`` records, per record)."""
    import statistics
    import time

    rounds: list[float] = []
    if side == "log_record":
        with tempfile.TemporaryDirectory(prefix="ecpa-wall-") as tmp:
            _write_log(Path(tmp), n)
            os.environ["ECPA_CG_LOGS"] = tmp
            _log_run(n)  # warm up
            for _ in range(7):
                start = time.perf_counter()
                _log_run(n)
                rounds.append((time.perf_counter() - start) / n)
    else:
        fn = _calls()[side]
        for _ in range(50):
            fn()
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            rounds.append((time.perf_counter() - start) / n)
    print(statistics.median(rounds))


def wall_per_call(side: str, n: int) -> float:
    """Seconds of one call of ``side`` (median of 7 rounds, in a fresh interpreter)."""
    proc = subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [sys.executable, "-m", "bench.instructions", "--wall", side, str(n)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(proc.stdout.strip().splitlines()[-1])


def _driver(side: str, n: int) -> None:
    if side == "log_record":  # the whole command over a log of n records
        _log_run(n)
        return
    calls = _calls()
    fn = calls[side]
    for _ in range(50):  # warm up: caches, lazily built tables, specialised bytecode
        fn()
    for _ in range(n):
        fn()


def _count(side: str, n: int, valgrind: str) -> int:
    with tempfile.TemporaryDirectory(prefix="ecpa-cg-") as tmp:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        if side == "log_record":
            _write_log(Path(tmp), n)
            env["ECPA_CG_LOGS"] = tmp
        proc = subprocess.run(  # noqa: S603 - our own interpreter and arguments
            [
                valgrind,
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/out",
                sys.executable,
                "-m",
                "bench.instructions",
                "--run",
                side,
                str(n),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
        if proc.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run of {side} failed: {proc.stderr[-2000:]}")
        return int(found.group(1))


def per_call(side: str, n: int, valgrind: str) -> float:
    """Instructions of one call of ``side``: (I(2n) - I(n)) / n."""
    return (_count(side, 2 * n, valgrind) - _count(side, n, valgrind)) / n


def rows(n: int) -> list[str]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return ["(not measured: no valgrind; Debian: apt install valgrind)"]
    lines = [
        f"{'row':<28} {'baseline':<18} {'baseline instr':>15} {'ours instr':>13} "
        f"{'ratio':>7}  target   verdict              "
        f"{'base us':>8} {'ours us':>8} {'wall ratio':>10}"
    ]
    cache: dict[str, float] = {}
    wall: dict[str, float] = {}
    for spec in SPECS:
        for side in (spec.ours, spec.base):
            if side not in cache:
                cache[side] = per_call(side, n, valgrind)
                wall[side] = wall_per_call(side, max(n, 1000))
        ours, base = cache[spec.ours], cache[spec.base]
        ratio = ours / base
        verdict = "meets" if ratio <= spec.target else "MISSES"
        if spec.stretch is not None and ratio <= spec.stretch:
            verdict = "meets (stretch too)"
        wall_ours, wall_base = wall[spec.ours] * 1e6, wall[spec.base] * 1e6
        lines.append(
            f"{spec.name:<28} {spec.baseline:<18} {base:>15,.0f} {ours:>13,.0f} "
            f"{ratio:>7.3f}  <= {spec.target:.2f}  {verdict:<20} "
            f"{wall_base:>8.1f} {wall_ours:>8.1f} {wall_ours / wall_base:>10.3f}"
        )
    lines.append(f"(instructions per call: callgrind, {n} and {2 * n} calls, difference / {n})")
    lines.append(
        f"(wall: median of 7 rounds of {max(n, 1000)} calls in a fresh interpreter, "
        f"load average {os.getloadavg()[0]:.1f}; seconds drift here by a third, counts do not)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="N (default 200)")
    parser.add_argument("--run", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--wall", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        _driver(args.run[0], int(args.run[1]))
        return 0
    if args.wall:
        _wall_driver(args.wall[0], int(args.wall[1]))
        return 0
    for line in rows(args.calls):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
