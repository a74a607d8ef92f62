"""A fleet's verdicts from one evidence store (``ecpa status --db DSN --all``, docs/scale.md
"The fleet verdict"): every launch not ended, each judged as ``ecpa status --db
--launch-id`` judges it, over one connection, the operator's trust store read once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ecpa.errors import EcpaError
from ecpa.runtime.judge import history
from ecpa.runtime.judge.context import HISTORY_BUDGET_S
from ecpa.runtime.judge.verdict import RuntimeStatus
from ecpa.runtime.stores.operator import operator_trust
from ecpa.runtime.stores.remote import status_from_store
from ecpa.runtime.stores.replay import ReplayDb
from ecpa.runtime.stores.store import EvidenceStore

__all__ = ["MAX_FLEET", "FleetEntry", "fleet_status"]

#: Launches judged at most by one fleet status, by default.
MAX_FLEET = 10_000


@dataclass(frozen=True)
class FleetEntry:
    """One launch of the fleet: its status, or why it could not be judged."""

    launch_id: str
    status: RuntimeStatus | None
    error: EcpaError | None = None


def fleet_status(
    dsn: str,
    *,
    now: int | None = None,
    trust: Path | None = None,
    replay_db: ReplayDb = None,
    max_idle: int | None = None,
    max_abstain: int | None = None,
    history_budget_s: float | None = HISTORY_BUDGET_S,
    limit: int | None = None,
) -> tuple[list[FleetEntry], bool]:
    """The status of every launch the store at ``dsn`` holds without an end (at most
    ``limit``, by default :data:`MAX_FLEET`, by launch id), each judged when its turn
    comes (``now`` None: by the database
    server's clock then, the checkpoints saved; a ``now`` of its own saves none); and
    whether there were more. A launch that cannot be judged is an entry with its error,
    never the end of the others. Once :data:`~ecpa.runtime.judge.history.STOP` is set (a
    signal, under :func:`~ecpa.runtime.host.status.interruptible`), no further launch is
    judged.

    Raises:
        EcpaError: ``ECPA_EVIDENCE_STORE`` when the store cannot be used;
            ``ATTESTATION_TRUST_STORE_CONFIG`` for an operator's trust store named but
            unusable; ``ECPA_REPLAY_STORE`` for a replay database that cannot be used.
    """
    operator = operator_trust(trust)
    limit = MAX_FLEET if limit is None else limit
    entries = []
    with EvidenceStore(dsn, create=False) as store:
        rows = store.query(
            "SELECT launch_id FROM ecpa_launch WHERE exit_doc IS NULL ORDER BY launch_id LIMIT %s",
            (max(0, limit) + 1,),
        )
        ids = [str(r[0]) for r in rows]
        for launch_id in ids[:limit]:
            if history.STOP.is_set():  # SIGTERM or SIGINT: no verdict on a cut-short walk
                break
            try:
                status = status_from_store(
                    dsn,
                    launch_id,
                    now=now,
                    replay_db=replay_db,
                    max_idle=max_idle,
                    max_abstain=max_abstain,
                    history_budget_s=history_budget_s,
                    save_checkpoints=now is None,
                    operator=operator,
                    store=store,
                )
            except EcpaError as exc:
                if store.transient:  # the store itself failed: no other launch can be judged
                    raise
                entries.append(FleetEntry(launch_id, None, exc))
                continue
            entries.append(FleetEntry(launch_id, status))
    return entries, len(ids) > limit
