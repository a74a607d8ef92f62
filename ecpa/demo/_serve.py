"""The demo's "where operators look" act: ``ecpa serve`` over the live two-rank launch, as a
process of its own on a free loopback port; its API says true with 2/2 slots and its
``/metrics`` says 1, then (after a rank is killed) its slot's gauge turns 0. Skipped, saying
why and how, where the ``serve`` extra is not installed."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ecpa.demo._tour import Tour, first_line, spawn_ecpa

__all__ = ["Served", "serving"]


class Served:
    """An ``ecpa serve`` the demo started, and the steps that ask it."""

    def __init__(self, url: str, tour: Tour) -> None:
        self.url, self.tour = url, tour

    def _get(self, path: str) -> str:
        # http://127.0.0.1:PORT, the address ecpa serve said it bound
        with urllib.request.urlopen(self.url + path, timeout=10) as response:  # noqa: S310
            text: str = response.read().decode()
        return text

    def _step(
        self,
        path: str,
        shown: Callable[[str], str],
        ok: Callable[[str], bool],
        why: str,
        timeout: float,
    ) -> None:
        self.tour.say(f"\n# {why}")
        self.tour.say(f"$ curl -s {self.url}{path}")
        deadline = time.monotonic() + timeout
        while True:
            text = self._get(path)
            if ok(text) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        self.tour.say(shown(text))
        self.tour.checks.append(ok(text))
        if not ok(text):
            self.tour.say("!! expected otherwise")

    def listing(self, launch_id: str, timeout: float = 30.0) -> None:
        def ok(text: str) -> bool:
            found = json.loads(text)["launches"]
            return any(
                x["launch_id"] == launch_id
                and x["runtime_effective"] is True
                and x["coverage"] == {"covered": 2, "slots": 2}
                for x in found
            )

        def shown(text: str) -> str:
            return json.dumps(json.loads(text)["launches"], indent=1)

        self._step("/v1/launches", shown, ok, "ecpa serve: every launch, its verdict", timeout)

    def gauges(self, launch_id: str, effective: int, slot1: int, timeout: float = 30.0) -> None:
        want = {
            f'ecpa_runtime_effective{{launch_id="{launch_id}"}}': effective,
            f'ecpa_slot_covered{{launch_id="{launch_id}",slot="scheduler.1"}}': slot1,
        }

        def lines(text: str) -> list[str]:
            heads = tuple(f"{name} " for name in want)
            return [line for line in text.splitlines() if line.startswith(heads)]

        def ok(text: str) -> bool:
            found = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines(text)}
            return found == {name: float(value) for name, value in want.items()}

        why = "its Prometheus metrics (what an alert rule reads)"
        self._step("/metrics", lambda text: "\n".join(lines(text)), ok, why, timeout)


@contextmanager
def serving(evidence_dir: Path, tour: Tour) -> Iterator[Served | None]:
    """``ecpa serve --evidence-dir EVIDENCE_DIR`` on a free port while the block runs (None,
    having said why, where it cannot run here)."""
    tour.act("serve")
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None:
        tour.say("(skipped: the serve extra is not installed: pip install 'ecpa[serve]')")
        yield None
        return
    args = ["serve", "--evidence-dir", str(evidence_dir), "--listen", "127.0.0.1:0"]
    proc = spawn_ecpa([*args, "--interval", "0.5"], cwd=evidence_dir, tour=tour)
    try:
        match = first_line(proc, r"ecpa serve: listening on (http://\S+) ", tour)
        if match is None:
            yield None
            return
        yield Served(match.group(1), tour)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
