"""A 0.2 launch directory written directly, as if ``ecpa run`` had supervised ``slots``
scheduler processes for a long time: each process's log holds ``records`` signed records
(one per ``interval`` seconds, the newest at ``now``), optionally after ``filler`` short
lines that stand for a much longer history, with a fake ``/proc`` in which every process
and the supervisor are alive. Used by ``bench.status`` and the status tests.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ecpa
from dla_plugin.host_evidence import Occurrence, host_event
from ecpa.observer.record import STATEMENT_TTL_S, Signer, Window, build_evidence
from ecpa.runtime.model.counters import HostCounts
from ecpa.runtime.model.enroll import kid_for, log_name
from ecpa.runtime.model.enrollment import (
    CERTIFY_SUBJECT,
    ENROLLMENTS_FILE,
    MANAGER_ISSUER,
    Enrollment,
    certificate_line,
    launch_certificate_line,
    manager_kid,
)
from ecpa.runtime.model.evidence import record_line
from ecpa.runtime.model.host_event import host_line, parse_host_line
from ecpa.runtime.model.host_ids import epoch_of
from ecpa.runtime.model.host_journal import JOURNAL_DIR, HostBook
from ecpa.runtime.model.launch import Slot, launch_from_bytes
from ecpa.runtime.model.plan import Plan, launch_document
from ecpa.runtime.model.process import LaunchEnvironment, ProcessIdentity

__all__ = [
    "MANAGER",
    "Written",
    "append_records",
    "environment",
    "hermetic_config",
    "manager_entry",
    "process_signer",
    "write_launch",
]

HOST = "bench-host"
BOOT = "boot-bench"
SUPERVISOR = ProcessIdentity(HOST, 100, 1, BOOT)
ISSUER = "urn:ecpa:issuer:bench"
CHALLENGE = "Q" * 43
#: The TEST ONLY manager key that certifies the process keys of every launch written here:
#: an operator's trust store must list it (:func:`manager_entry`) for them to be trusted.
MANAGER = ecpa.SigningKey.from_seed(b"M" * 32)


_CONFIG: list[Path] = []


def hermetic_config() -> Path:
    """The operator's configuration of this benchmark process (docs/keys.md), never the
    user's: ``$XDG_CONFIG_HOME`` set to a temporary directory whose ``ecpa/trust.json`` lists
    :data:`MANAGER` (which certifies the launches written here) and where ``ecpa run`` makes
    its manager key on first use; removed at exit. Once per process; returns it."""
    if not _CONFIG:
        home = Path(tempfile.mkdtemp(prefix="ecpa-bench-config-"))
        atexit.register(shutil.rmtree, home, True)
        (home / "ecpa").mkdir(mode=0o700)
        trust = {"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]}
        (home / "ecpa" / "trust.json").write_text(json.dumps(trust))
        os.environ["XDG_CONFIG_HOME"] = str(home)
        for name in ("ECPA_TRUST_STORE", "ECPA_MANAGER_KEY"):
            os.environ.pop(name, None)
        _CONFIG.append(home)
    return _CONFIG[0]


def manager_entry(key: ecpa.SigningKey = MANAGER) -> dict[str, object]:
    """The operator's trust store entry of a manager key (docs/keys.md)."""
    return {
        "issuer": MANAGER_ISSUER,
        "kid": manager_kid(key.public_key),
        "public_key_b64": key.public_key.to_b64(),
        "subjects": [CERTIFY_SUBJECT],
        "enabled": True,
        "not_before": 0,
        "not_after": 2**53 - 1,
    }


@dataclass(frozen=True)
class Written:
    """What was written: the launch directory, the fake ``/proc``, and the processes."""

    directory: Path
    proc_root: Path
    processes: dict[Slot, ProcessIdentity]


def _stat_line(pid: int, ppid: int, ticks: int) -> str:
    fields = [str(pid), "(python3)", "S", str(ppid)] + ["0"] * 48
    fields[21] = str(ticks)
    return " ".join(fields) + "\n"


def _fake_proc(root: Path, processes: dict[object, ProcessIdentity]) -> Path:
    proc = root / "proc"
    (proc / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(BOOT + "\n")
    (proc / "1").mkdir(exist_ok=True)
    (proc / "1" / "stat").write_text(_stat_line(1, 0, 1))
    entries = [(SUPERVISOR, 1), *((who, SUPERVISOR.pid) for who in processes.values())]
    for who, parent in entries:
        (proc / str(who.pid)).mkdir(exist_ok=True)
        (proc / str(who.pid) / "stat").write_text(_stat_line(who.pid, parent, who.start_ticks))
    return proc


PLAN_ID = "plan-bench"
PLUGIN_ID = "org.vllm-hust.dla/victim-selector"
DIGEST = "sha256:" + "7" * 64


def _seed(slot: Slot) -> bytes:
    """The TEST ONLY seed of the process key of ``slot``'s (first) process."""
    return bytes([slot.ordinal % 256]) * 31 + b"k"


def environment(directory: Path, challenge: str = CHALLENGE) -> LaunchEnvironment:
    """The binding every process of the launch :func:`write_launch` wrote at ``directory``
    holds (0.2: process keys, enrolled; ``challenge``: the one it was written with)."""
    return LaunchEnvironment(
        plan_id=PLAN_ID,
        launch_id=directory.name,
        challenge=challenge,
        plugin_id=PLUGIN_ID,
        artifact_digest=DIGEST,
        issuer=ISSUER,
        kid=None,
        signing_key_file=None,
        evidence_dir=directory / "evidence",
        process_epoch=1,
        enroll_socket=directory / "enroll.sock",
    )


def process_signer(slot: Slot, who: ProcessIdentity, seed: bytes | None = None) -> Signer:
    """The signer of ``who`` in ``slot``, with its process key (default: the slot's seed,
    as :func:`write_launch` gives the slot's first process)."""
    key = ecpa.SigningKey.from_seed(_seed(slot) if seed is None else seed)
    return Signer(key, kid_for(slot, who), slot, process_keys=True)


HOST_POLICY = "dla_plugin.selector.DlaVictimSelector"


class _HostJournal:
    """A process's host journal as ecpa's sink writes it: the events the project's model of
    the host delivers (a resolution, then selected dispatches), each line accounted for by a
    :class:`HostBook` as the sink accounts for it."""

    def __init__(self, who: ProcessIdentity, slot: Slot, launch_id: str, path: Path) -> None:
        start = f"pid:{who.pid}:start_ticks:{who.start_ticks}"
        self.identity = {
            "host": who.host,
            "role": "engine-core-scheduler",
            "ordinal": slot.ordinal,
            "pid": who.pid,
            "start_identity": start,
            "process_epoch": epoch_of(start),
            "assignment_source": "host",
        }
        self.launch_id = launch_id
        self.book = HostBook()
        self.out = path.open("wb")
        self.attempt = self.seq = 0

    def deliver(self, detail: str, occurrence: int | str, kind: str, at: int) -> None:
        self.attempt += 1
        what = Occurrence(
            "resolved" if kind == "scheduler_resolution" else "invoked",
            "vllm.preemption_policy",
            HOST_POLICY,
            HOST_POLICY,
            f"engine-core.scheduler:{detail}",
            occurrence,
            kind,
            "controller-bench",
            PLAN_ID,
            self.launch_id,
            "bound",
        )
        event = host_event(
            self.identity, what, delivery_attempt=self.attempt, observed_at_ns=at * 10**9
        )
        line = host_line(event)
        self.book.add(parse_host_line(line))
        self.out.write(line + b"\n")

    def account(self, selected: int, at: int) -> HostCounts:
        """Deliver dispatches until ``selected`` were, then the account of every line."""
        if self.attempt == 0:
            self.deliver("protocol-validated", "controller:controller-bench", _RESOLUTION, at)
        while self.seq < selected:
            self.seq += 1
            self.deliver("selected", self.seq, "scheduler_dispatch", at)
        return self.book.counts(refused=0, lost=0, final=False)


_RESOLUTION = "scheduler_resolution"


def write_launch(
    root: Path,
    *,
    slots: int,
    records: int,
    now: int,
    interval: int = 1,
    filler: int = 0,
    launch_id: str = "launch-bench",
    twin: bool = False,
    supervisor: ProcessIdentity = SUPERVISOR,
    host_evidence: bool = False,
    challenge: str = CHALLENGE,
    max_abstain_s: int | None = None,
    ttl: int = STATEMENT_TTL_S,
) -> Written:
    """Write the launch under ``root`` (see the module's text) and return where.
    ``supervisor`` names another supervisor in ``launch.json`` (a real live process, for a
    shipper that checks it on this host); the fake ``/proc`` keeps the default one. With
    ``host_evidence``, the plan requires the host's witness, each process has its host
    journal (a resolution, then selected dispatches, delivered by the model of the host)
    and each record carries its account. Launches written with one ``challenge`` (the
    default) claim the same nonces: a fleet gives each its own. ``max_abstain_s`` is written
    in ``launch.json`` when given (the records select only up to ``now``: by the real clock,
    a slot is abstaining 30 s later, by default); ``ttl`` is each record's lifetime (the
    observer's 60 s by default; at most 300)."""
    wanted = tuple(Slot("scheduler", i) for i in range(slots))
    plan = Plan(
        plan_id=PLAN_ID,
        plugin_id=PLUGIN_ID,
        artifact_digest=DIGEST,
        issuer=ISSUER,
        emit_interval_s=interval,
        heartbeat_window_s=3 * interval,
        slots=wanted,
        host_evidence="required" if host_evidence else "off",
        host_policy=HOST_POLICY if host_evidence else None,
    )
    directory = root / launch_id
    logs = directory / "evidence" / launch_id
    logs.mkdir(parents=True, mode=0o700)
    for path in (directory, directory / "evidence", logs):
        path.chmod(0o700)
    started = now - records * interval - 10
    doc = launch_document(
        plan, launch_id=launch_id, challenge=challenge, started_at=started, supervisor=supervisor
    )
    if max_abstain_s is not None:
        doc["max_abstain_s"] = max_abstain_s
    launch_doc = json.dumps(doc).encode()
    (directory / "launch.json").write_bytes(launch_doc)
    expected = launch_from_bytes(launch_doc, "launch.json")
    seal = launch_certificate_line(expected, launch_doc, supervisor, MANAGER, issued_at=started)
    certificates = [seal]
    env = environment(directory, challenge)
    processes = {slot: ProcessIdentity(HOST, 1000 + slot.ordinal, 5000, BOOT) for slot in wanted}
    writers = [(slot, who, _seed(slot)) for slot, who in processes.items()]
    if twin:  # a second live process in slot 0, with a key of its own
        writers.append((wanted[0], ProcessIdentity(HOST, 2000, 5000, BOOT), b"t" * 32))
    entries = []
    if host_evidence:
        (logs / JOURNAL_DIR).mkdir(mode=0o700)
    for slot, who, seed in writers:
        signer = process_signer(slot, who, seed)
        journal = (
            _HostJournal(who, slot, launch_id, logs / JOURNAL_DIR / log_name(signer.kid))
            if host_evidence
            else None
        )
        enrollment = Enrollment(
            len(certificates) + 1,
            "enrolled",
            ISSUER,
            signer.kid,
            signer.key.public_key.to_b64(),
            ("host-runtime",),
            slot,
            who,
            started - 5,
            now + 86400,
        )
        entries.append(enrollment.entry())
        certificates.append(certificate_line(enrollment, expected, MANAGER, issued_at=started))
        path = logs / log_name(signer.kid)
        with path.open("wb") as out:
            out.write(b"x\n" * filler)  # the long past, as short refused lines
            for seq in range(1, records + 1):
                at = now - (records - seq) * interval
                host = None if journal is None else journal.account(3 * seq, at)
                window = Window(
                    seq, 4 * seq, 3 * seq, seq, 0, 0, at - interval, at, at, seq, at, host
                )
                out.write(
                    record_line(build_evidence(env, who, signer, window, issued_at=at, ttl=ttl))
                )
        os.chmod(path, 0o600)
        if journal is not None:
            journal.out.close()
    trust = {"schema": "ecpa-trust-store/0.1", "keys": entries}
    (directory / "trust.json").write_text(json.dumps(trust))
    (directory / ENROLLMENTS_FILE).write_bytes(b"".join(certificates))
    alive = {**{(s, w.pid): w for s, w, _ in writers}}
    return Written(directory, _fake_proc(root, alive), processes)


def append_records(w: Written, seq: int, at: int, *, interval: int) -> int:
    """One more signed record, number ``seq`` issued at ``at`` (``interval`` seconds after
    the one before), at the end of each process's log of the launch :func:`write_launch`
    wrote (its first processes, without host evidence): the next second of a live launch.
    Returns the records written."""
    doc = json.loads((w.directory / "launch.json").read_bytes())
    env = environment(w.directory, doc["challenge"])
    logs = w.directory / "evidence" / w.directory.name
    for slot, who in w.processes.items():
        signer = process_signer(slot, who)
        window = Window(seq, 4 * seq, 3 * seq, seq, 0, 0, at - interval, at, at, seq, at, None)
        line = record_line(build_evidence(env, who, signer, window, issued_at=at))
        with (logs / log_name(signer.kid)).open("ab") as out:
            out.write(line)
    return len(w.processes)
