"""Trust rooted outside the launch directory: a process key counts only through the
manager's enrollment certificate, checked against the operator's trust store."""

from __future__ import annotations

import json
from pathlib import Path

from bench.launchdir import HOST, Written, environment, process_signer, write_launch
from ecpa.observer.record import Window, build_evidence
from ecpa.runtime.host.status import status_from_launch_dir
from ecpa.runtime.model.enroll import log_name
from ecpa.runtime.model.evidence import record_line
from ecpa.runtime.model.launch import Slot

NOW = 1_800_000_000


def _status(w: Written):  # type: ignore[no-untyped-def]
    return status_from_launch_dir(
        w.directory, now=NOW, proc_root=w.proc_root, host=HOST, history_budget_s=None
    )


def _forge(w: Written, seed: bytes) -> None:
    """What a reviewer who can write the launch directory did: slot 0's key replaced in
    trust.json by one of theirs, and fresh records signed with it for the live process."""
    slot = Slot("scheduler", 0)
    who = w.processes[slot]
    signer = process_signer(slot, who, seed)
    trust_file = w.directory / "trust.json"
    doc = json.loads(trust_file.read_text())
    for entry in doc["keys"]:
        if entry["kid"] == signer.kid:
            entry["public_key_b64"] = signer.key.public_key.to_b64()
    trust_file.write_text(json.dumps(doc))
    env = environment(w.directory)
    lines = []
    for seq in range(1, 4):
        at = NOW - 3 + seq
        window = Window(seq, 4 * seq, 3 * seq, seq, 0, 0, at - 1, at, at, seq, at, None)
        lines.append(record_line(build_evidence(env, who, signer, window, issued_at=at)))
    log = w.directory / "evidence" / w.directory.name / log_name(signer.kid)
    log.write_bytes(b"".join(lines))


def test_a_key_replaced_in_the_launch_directory_with_forged_records_gives_false(
    tmp_path: Path,
) -> None:
    w = write_launch(tmp_path, slots=1, records=3, now=NOW)
    assert _status(w).effective
    _forge(w, b"f" * 32)
    status = _status(w)
    assert not status.effective
    assert "uncertified_key" in {r.code.value for r in status.reasons}
