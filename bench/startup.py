"""Start-up of the ``ecpa`` script: each command as a user runs it, against ``python -c
pass`` of the same interpreter in the same run (paired rounds, alternating which goes
first), as ratios (issue 27's targets: ``ecpa --version`` <= 4x, ``ecpa verify one.jws``
<= 7x, ``ecpa status --launch`` of a small launch <= 8x).

Every process runs with its bytecode cache (``PYTHONDONTWRITEBYTECODE`` removed; a first
unmeasured run writes it), as an installed package runs: pip compiles a wheel's modules when
it installs them. Without the cache every run compiles each module again (about 60 ms).

Two more rows, for information: the floor of any typer command that verifies, the libraries
alone with none of ecpa (typer, and the Ed25519 backends cryptography and PyNaCl); and
pydantic with one model built (pydantic loads most of itself on the first), which ``ecpa
verify`` and ``ecpa status`` no longer pay: their documents are shapes
(``ecpa.shapes.shape``), and typer is below 0.29, which coerced every parameter through a
pydantic ``TypeAdapter``.

The small launch is a real one: ``ecpa run`` of the DLA driver for a few seconds (one
scheduler process), ended, so ``ecpa status`` judges all its evidence as of its end.

    python -m bench.startup [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cli_logs import NOW, Workdir
from bench.launchdir import hermetic_config
from bench.paired import Row, summarize, table

TARGETS = {
    "--version": 4.0,
    "verify": 7.0,
    "status": 8.0,
    "--help": None,
    "floor": None,
    "pydantic": None,
}
SCRIPT = Path(sys.executable).with_name("ecpa")
FLOOR = (
    "import typer, nacl.bindings\nfrom cryptography.hazmat.primitives.asymmetric import ed25519\n"
)
PYDANTIC = "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(argv: list[str], cwd: Path, expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=_env()
    )
    took = time.perf_counter() - start
    if done.returncode != expect:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-300:]}")
    return took


def _small_launch(tmp: Path, seconds: float) -> Path:
    """A real launch: ``ecpa run`` of the DLA driver for ``seconds``; its directory."""
    driver = [sys.executable, "-m", "dla_plugin.drive", "--seconds", str(seconds)]
    done = subprocess.run(  # noqa: S603
        [str(SCRIPT), "run", "--evidence-dir", str(tmp / "runs"), "--json", "--", *driver],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ecpa run exited {done.returncode}: {done.stderr[-300:]}")
    record = json.loads(done.stderr.splitlines()[0])
    return Path(record["directory"])


def startup_rows(rounds: int, tmp: Path, *, launch_seconds: float = 4.0) -> list[Row]:
    """The start-up rows (see the module's text)."""
    work = Workdir(tmp)
    jws, trust = work.pair("one"), work.trust
    launch = _small_launch(tmp, launch_seconds)
    commands = {
        "--version": ([str(SCRIPT), "--version"], 0),
        "--help": ([str(SCRIPT), "--help"], 0),
        "verify": ([str(SCRIPT), "verify", str(jws), "--trust", str(trust), "--now", str(NOW)], 0),
        "status": ([str(SCRIPT), "status", "--launch", str(launch)], 1),  # ended: false
        "floor": ([sys.executable, "-c", FLOOR], 0),
        "pydantic": ([sys.executable, "-c", PYDANTIC], 0),
    }
    baseline = [sys.executable, "-c", "pass"]
    rows = []
    for name, (argv, expect) in commands.items():
        _time(argv, tmp, expect)  # warm the page cache and the bytecode cache
        base: list[float] = []
        ours: list[float] = []
        for r in range(rounds):
            if r % 2 == 0:
                base.append(_time(baseline, tmp, 0))
                ours.append(_time(argv, tmp, expect))
            else:
                ours.append(_time(argv, tmp, expect))
                base.append(_time(baseline, tmp, 0))
        m = summarize(base, ours)
        target = TARGETS[name]
        shown = "ecpa " + " ".join(a for a in argv[1:2]) + (" one.jws" if name == "verify" else "")
        shown += " --launch (a 4 s launch, ended)" if name == "status" else ""
        if name == "floor":
            shown = "floor: typer, Ed25519 libs"
        if name == "pydantic":
            shown = "not paid: pydantic, one model"
        rows.append(
            Row(
                shown,
                "python -c pass",
                m.base,
                m.ours,
                "s",
                m.ratio,
                m.spread,
                f"<= {target:g}" if target is not None else "(information)",
                None if target is None else m.ratio <= target,
                f"{rounds} paired rounds; the installed script",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    hermetic_config()  # the operator's trust: the bench's own, never the user's
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--rounds", type=int, default=21, help="paired rounds per command")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ecpa-bench-startup-") as tmp:
        rows = startup_rows(args.rounds, Path(tmp))
    print(table(rows))
    print(f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
