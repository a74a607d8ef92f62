"""The demo's steps: the profile and ``runtime_effective`` shown end to end."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ecpa.demo._host import host_loop
from ecpa.demo._launch import launch_loop, slots_loop
from ecpa.demo._sim import sim_step
from ecpa.demo._tour import Ecpa, Say, Tour
from ecpa.errors import invalid_input
from ecpa.observer.record import Signer, Window, build_evidence
from ecpa.profile.keys import SigningKey
from ecpa.profile.statement import PROFILE_ID, STATEMENT_SCHEMA
from ecpa.runtime import EvidenceLog, LaunchEnvironment, Slot, read_identity

__all__ = ["run_demo"]


def _statement(now: int) -> dict[str, Any]:
    return {
        "schema": STATEMENT_SCHEMA,
        "profile": PROFILE_ID,
        "issuer": "urn:ecpa:issuer:demo-host",
        "kid": "demo-key",
        "subject": "host-runtime",
        "plan_id": "plan:demo",
        "launch_id": "launch-demo",
        "plugin_id": "plugin:dla",
        "obligation": "victim-selector-dispatch",
        "event": "invoked",
        "challenge_nonce": "challenge-demo:1",
        "artifact_digest": "sha256:" + "ab" * 32,
        "evidence_digest": "sha256:" + "cd" * 32,
        "process": {
            "host": "demo-host",
            "role": "scheduler",
            "start_identity": "pid:1:start_ticks:1:boot:demo",
            "ordinal": 0,
            "epoch": 1,
        },
        "observed_at": now,
        "issued_at": now,
        "expires_at": now + 60,
        "critical_claims": [],
    }


def _emit_own_evidence(d: Path, now: int, key: SigningKey) -> None:
    """Two evidence records about this very process (alive while the demo runs), built as the
    observer of a real launch builds them, and the binding ``ecpa status`` needs."""
    launch = LaunchEnvironment(
        plan_id="plan:demo",
        launch_id="launch-demo",
        challenge="challenge-demo",
        plugin_id="plugin:dla",
        artifact_digest="sha256:" + "ab" * 32,
        issuer="urn:ecpa:issuer:demo-host",
        kid="demo-key",
        signing_key_file=d / "demo-key.pem",
        evidence_dir=d,
        process_epoch=1,
    )
    me = read_identity()
    signer = Signer(key, "demo-key", Slot("scheduler", 0), process_keys=False)
    with EvidenceLog(d / "launch-demo.jsonl") as log:
        for seq in (1, 2):
            window = Window(seq, 10 * seq, 4 * seq, 6 * seq, 0, 0, now - 1, now, now, 2 * seq, now)
            log.append(build_evidence(launch, me, signer, window, issued_at=now))
    binding = {
        "plan_id": launch.plan_id,
        "launch_id": launch.launch_id,
        "plugin_id": launch.plugin_id,
        "artifact_digest": launch.artifact_digest,
        "process_epoch": launch.process_epoch,
        "challenge": launch.challenge,
    }
    (d / "launch-binding.json").write_text(json.dumps(binding) + "\n")


def _kept(directory: Path) -> Path:
    """``directory`` made if missing and required empty (``ecpa demo --keep DIR``)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        found = next(directory.iterdir(), None)
    except OSError as exc:
        raise invalid_input(f"expected to make --keep {directory}, found: {exc.strerror}") from None
    if found is not None:
        raise invalid_input(f"expected --keep {directory} empty or new, found {found.name} in it")
    return directory.absolute()


def run_demo(ecpa: Ecpa, say: Say, *, keep: Path | None = None) -> tuple[int, int]:
    """Run the main job end to end in a temporary directory (``keep``: in that directory,
    which must be empty, and left there): make a key and a trust store, sign a statement,
    verify it, tamper with it, replay it (each refusal shows its code), judge a live launch,
    and ask the value simulator whether DLA pays off.

    ``ecpa`` runs each command in this process and ``say`` prints the narrative. Returns
    how many steps behaved as the profile says, and how many there were.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for a ``keep`` directory that is not empty.
    """
    now = int(time.time())
    tour = Tour(ecpa, say)

    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ecpa-demo-"))
        else:
            tmp = str(_kept(keep))
        d = Path(tmp)
        trust, db = str(d / "trust.json"), str(d / "replay.db")
        say(f"ecpa demo in {d} (now={now})")
        tour.act("evidence")
        tour.step(
            [
                "keygen",
                "--issuer",
                "urn:ecpa:issuer:demo-host",
                "--kid",
                "demo-key",
                "--out-dir",
                tmp,
                "--trust",
                trust,
            ],
            0,
            "public_key_b64",
            "a signing key, and its entry in a new trust store",
        )
        (d / "statement.json").write_text(json.dumps(_statement(now), indent=2) + "\n")
        tour.step(
            [
                "sign",
                str(d / "statement.json"),
                "--key",
                str(d / "demo-key.pem"),
                "--out",
                str(d / "evidence"),
            ],
            0,
            "evidence.jws",
            "sign a statement: evidence.json (JCS payload) + evidence.jws (detached JWS)",
        )
        verify = ["verify", str(d / "evidence.jws"), "--trust", trust]
        tour.step([*verify, "--replay-db", db], 0, "OK ", "verify it, recording its nonce")
        tour.step([*verify, "--replay-db", db], 1, "REPLAYED_NONCE", "the same evidence again")
        payload = (d / "evidence.json").read_bytes()
        (d / "tampered.json").write_bytes(payload.replace(b"launch-demo", b"launch-demO"))
        (d / "tampered.jws").write_bytes((d / "evidence.jws").read_bytes())
        tour.step(
            ["verify", str(d / "tampered.jws"), "--trust", trust],
            1,
            "ATTESTATION_INVALID_SIGNATURE",
            "one byte of the payload changed",
        )
        tour.step([*verify, "--now", str(now + 3600)], 1, "ATTESTATION_EXPIRED", "an hour later")
        tour.act("own")
        emitted = int(time.time())  # the steps above may take seconds on a loaded machine
        _emit_own_evidence(d, emitted, SigningKey.load(d / "demo-key.pem"))
        status = ["status", "--evidence", str(d / "launch-demo.jsonl"), "--trust", trust]
        status += ["--binding", str(d / "launch-binding.json")]
        tour.step(
            [*status, "--now", str(emitted)],
            0,
            "runtime_effective: true",
            "this process signed two evidence records about itself: is it really working?",
        )
        tour.step(
            [*status, "--now", str(emitted + 60)],
            1,
            "stale",
            "a minute later, with no new evidence, runtime_effective is withdrawn",
        )
        tour.step(
            ["inspect", str(d / "tampered.jws"), "--json"],
            0,
            '"verified":false',
            "inspect decodes without verifying, and says so",
        )
        tour.step(
            [
                "trust",
                "disable",
                trust,
                "--issuer",
                "urn:ecpa:issuer:demo-host",
                "--kid",
                "demo-key",
            ],
            0,
            "disabled",
            "withdraw the key",
        )
        tour.step(verify, 1, "ATTESTATION_TRUST_POLICY", "evidence under a disabled key")
        tour.step(status, 1, "no valid evidence", "runtime_effective under a disabled key")
        launch_loop(d, tour)
        slots_loop(d, tour)
        host_loop(d, tour)
        sim_step(tour)
        if keep is not None:
            say(
                f"\neverything the demo made is in {d}: each command above runs again there, "
                "but those of the throw-away PostgreSQL, which is stopped and removed"
            )
    return sum(tour.checks), len(tour.checks)
