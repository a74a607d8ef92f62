"""Runtime evidence (RUNTIME.md), in four sub-rooms by role, each importing only those
before it: :mod:`~ecpa.runtime.model` (documents and names), :mod:`~ecpa.runtime.judge`
(the pure judgement of ``runtime_effective``), :mod:`~ecpa.runtime.stores` (stores shared
across hosts) and :mod:`~ecpa.runtime.host` (the local edge: files, ``ecpa status``,
``ecpa ship``).

This package is the facade other rooms use: every name they need from the runtime is
exported here (and nothing else of the sub-rooms may be imported from outside). Names are
loaded on first use, so a process that needs one part (the observer in a scheduler, say)
imports only that part.

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors`, :mod:`ecpa._files`; never observer,
launcher, corpus or cli.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

# The facade's names, listed once: type checkers take each from its module here, and
# _exports() below reads these same lines as the table of what to load on first use.
if TYPE_CHECKING:
    from ecpa.runtime.host.audit import Audit as Audit
    from ecpa.runtime.host.audit import audit_launch_dir as audit_launch_dir
    from ecpa.runtime.host.audit import audit_store as audit_store
    from ecpa.runtime.host.audit_plot import plot_audit as plot_audit
    from ecpa.runtime.host.evidence_log import EvidenceLog as EvidenceLog
    from ecpa.runtime.host.launches import LAUNCH_DIR_NAME as LAUNCH_DIR_NAME
    from ecpa.runtime.host.launches import Judged as Judged
    from ecpa.runtime.host.launches import JudgedList as JudgedList
    from ecpa.runtime.host.launches import LaunchList as LaunchList
    from ecpa.runtime.host.launches import LaunchSummary as LaunchSummary
    from ecpa.runtime.host.launches import Listing as Listing
    from ecpa.runtime.host.launches import judge_launches as judge_launches
    from ecpa.runtime.host.launches import list_launches as list_launches
    from ecpa.runtime.host.launches import list_source as list_source
    from ecpa.runtime.host.launches import merge_parts as merge_parts
    from ecpa.runtime.host.receipt import RECEIPT_SUBJECT as RECEIPT_SUBJECT
    from ecpa.runtime.host.receipt import check_receipt as check_receipt
    from ecpa.runtime.host.receipt import check_receipt_files as check_receipt_files
    from ecpa.runtime.host.receipt import report_digest as report_digest
    from ecpa.runtime.host.receipt import sign_receipt as sign_receipt
    from ecpa.runtime.host.receipt import write_receipt as write_receipt
    from ecpa.runtime.host.ship import ShipReport as ShipReport
    from ecpa.runtime.host.ship import ship_launch as ship_launch
    from ecpa.runtime.host.status import interruptible as interruptible
    from ecpa.runtime.host.status import status_from_files as status_from_files
    from ecpa.runtime.host.status import status_from_launch_dir as status_from_launch_dir
    from ecpa.runtime.host.trust_file import add_trust_entry as add_trust_entry
    from ecpa.runtime.host.trust_file import check_trust_addition as check_trust_addition
    from ecpa.runtime.host.trust_file import disable_trust_entry as disable_trust_entry
    from ecpa.runtime.host.trust_file import trust_entry as trust_entry
    from ecpa.runtime.host.trust_file import update_trust_file as update_trust_file
    from ecpa.runtime.host.trust_file import validity_window as validity_window
    from ecpa.runtime.judge import history as history
    from ecpa.runtime.judge.audit import AUDIT_SCHEMA as AUDIT_SCHEMA
    from ecpa.runtime.judge.audit import report_bytes as report_bytes
    from ecpa.runtime.judge.audit import report_lines as report_lines
    from ecpa.runtime.judge.records import remember_records as remember_records
    from ecpa.runtime.judge.verdict import RuntimeStatus as RuntimeStatus
    from ecpa.runtime.judge.verdict import SlotStatus as SlotStatus
    from ecpa.runtime.model.counters import COUNTERS_SCHEMA as COUNTERS_SCHEMA
    from ecpa.runtime.model.counters import Counters as Counters
    from ecpa.runtime.model.counters import CountersProcess as CountersProcess
    from ecpa.runtime.model.counters import HostCounts as HostCounts
    from ecpa.runtime.model.enroll import MAX_MESSAGE as MAX_MESSAGE
    from ecpa.runtime.model.enroll import Request as Request
    from ecpa.runtime.model.enroll import enroll as enroll
    from ecpa.runtime.model.enroll import kid_for as kid_for
    from ecpa.runtime.model.enroll import log_name as log_name
    from ecpa.runtime.model.enroll import nonce_for as nonce_for
    from ecpa.runtime.model.enroll import parse_request as parse_request
    from ecpa.runtime.model.enroll import reply_bytes as reply_bytes
    from ecpa.runtime.model.enrollment import CERTIFY_SUBJECT as CERTIFY_SUBJECT
    from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE as ENROLLMENTS_FILE
    from ecpa.runtime.model.enrollment import MANAGER_ISSUER as MANAGER_ISSUER
    from ecpa.runtime.model.enrollment import Enrollment as Enrollment
    from ecpa.runtime.model.enrollment import certificate_line as certificate_line
    from ecpa.runtime.model.enrollment import (
        launch_certificate_line as launch_certificate_line,
    )
    from ecpa.runtime.model.enrollment import manager_kid as manager_kid
    from ecpa.runtime.model.evidence import MAX_RECORD_LENGTH as MAX_RECORD_LENGTH
    from ecpa.runtime.model.evidence import Evidence as Evidence
    from ecpa.runtime.model.evidence import evidence_digest as evidence_digest
    from ecpa.runtime.model.evidence import issued_at_of as issued_at_of
    from ecpa.runtime.model.evidence import parse_record as parse_record
    from ecpa.runtime.model.evidence import read_log as read_log
    from ecpa.runtime.model.evidence import verify_evidence as verify_evidence
    from ecpa.runtime.model.host_binding import ProcessClaim as ProcessClaim
    from ecpa.runtime.model.host_binding import check_binding as check_binding
    from ecpa.runtime.model.host_event import DISPATCH_OUTCOMES as DISPATCH_OUTCOMES
    from ecpa.runtime.model.host_event import HOST_ENV_PREFIX as HOST_ENV_PREFIX
    from ecpa.runtime.model.host_event import HOST_EVENT_SCHEMA as HOST_EVENT_SCHEMA
    from ecpa.runtime.model.host_event import SCHEDULER_ROLE as SCHEDULER_ROLE
    from ecpa.runtime.model.host_event import SINK_TARGET as SINK_TARGET
    from ecpa.runtime.model.host_event import HostEvent as HostEvent
    from ecpa.runtime.model.host_event import check_host_event as check_host_event
    from ecpa.runtime.model.host_event import host_line as host_line
    from ecpa.runtime.model.host_event import parse_host_line as parse_host_line
    from ecpa.runtime.model.host_ids import HostEventCode as HostEventCode
    from ecpa.runtime.model.host_ids import HostEventRefused as HostEventRefused
    from ecpa.runtime.model.host_ids import dispatch_id_of as dispatch_id_of
    from ecpa.runtime.model.host_ids import epoch_of as epoch_of
    from ecpa.runtime.model.host_ids import event_id_of as event_id_of
    from ecpa.runtime.model.host_journal import JOURNAL_DIR as JOURNAL_DIR
    from ecpa.runtime.model.host_journal import HostBook as HostBook
    from ecpa.runtime.model.host_journal import JournalCheck as JournalCheck
    from ecpa.runtime.model.host_journal import chain_step as chain_step
    from ecpa.runtime.model.host_journal import check_journal as check_journal
    from ecpa.runtime.model.launch import EXIT_SCHEMA as EXIT_SCHEMA
    from ecpa.runtime.model.launch import LAUNCH_SUBJECT as LAUNCH_SUBJECT
    from ecpa.runtime.model.launch import MAX_LAUNCH_FILE_BYTES as MAX_LAUNCH_FILE_BYTES
    from ecpa.runtime.model.launch import ExpectedLaunch as ExpectedLaunch
    from ecpa.runtime.model.launch import Slot as Slot
    from ecpa.runtime.model.launch import check_launch_id as check_launch_id
    from ecpa.runtime.model.launch import expected_from_dict as expected_from_dict
    from ecpa.runtime.model.membership import Membership as Membership
    from ecpa.runtime.model.membership import children_now as children_now
    from ecpa.runtime.model.plan import MAX_TTL_S as MAX_TTL_S
    from ecpa.runtime.model.plan import PLAN_SCHEMA as PLAN_SCHEMA
    from ecpa.runtime.model.plan import Plan as Plan
    from ecpa.runtime.model.plan import launch_document as launch_document
    from ecpa.runtime.model.plan import plan_from_bytes as plan_from_bytes
    from ecpa.runtime.model.plan import plan_from_dict as plan_from_dict
    from ecpa.runtime.model.process import BINDING_ENV_NAMES as BINDING_ENV_NAMES
    from ecpa.runtime.model.process import BINDING_FIELDS as BINDING_FIELDS
    from ecpa.runtime.model.process import PR_SET_CHILD_SUBREAPER as PR_SET_CHILD_SUBREAPER
    from ecpa.runtime.model.process import PROC as PROC
    from ecpa.runtime.model.process import LaunchEnvironment as LaunchEnvironment
    from ecpa.runtime.model.process import ProcessIdentity as ProcessIdentity
    from ecpa.runtime.model.process import children_of as children_of
    from ecpa.runtime.model.process import launch_from_env as launch_from_env
    from ecpa.runtime.model.process import make_undumpable as make_undumpable
    from ecpa.runtime.model.process import prctl as prctl
    from ecpa.runtime.model.process import proc_table as proc_table
    from ecpa.runtime.model.process import read_identity as read_identity
    from ecpa.runtime.stores.fleet import FleetEntry as FleetEntry
    from ecpa.runtime.stores.fleet import fleet_status as fleet_status
    from ecpa.runtime.stores.operator import MANAGER_KEY_ENV as MANAGER_KEY_ENV
    from ecpa.runtime.stores.operator import TRUST_ENV as TRUST_ENV
    from ecpa.runtime.stores.operator import OperatorTrust as OperatorTrust
    from ecpa.runtime.stores.operator import default_manager_key as default_manager_key
    from ecpa.runtime.stores.operator import default_trust_store as default_trust_store
    from ecpa.runtime.stores.operator import operator_trust as operator_trust
    from ecpa.runtime.stores.pgconn import describe_dsn as describe_dsn
    from ecpa.runtime.stores.pgconn import scrub_dsn as scrub_dsn
    from ecpa.runtime.stores.postgres import is_postgres_dsn as is_postgres_dsn
    from ecpa.runtime.stores.remote import status_from_store as status_from_store
    from ecpa.runtime.stores.replay import MemoryReplayFence as MemoryReplayFence
    from ecpa.runtime.stores.replay import PostgresReplayFence as PostgresReplayFence
    from ecpa.runtime.stores.replay import ReplayFence as ReplayFence
    from ecpa.runtime.stores.replay import SqliteReplayFence as SqliteReplayFence
    from ecpa.runtime.stores.replay import open_replay_fence as open_replay_fence
    from ecpa.runtime.stores.store import EvidenceStore as EvidenceStore
    from ecpa.runtime.stores.store_prune import PrunedDay as PrunedDay
    from ecpa.runtime.stores.store_prune import prune_store as prune_store
    from ecpa.runtime.stores.store_roles import StoreRoles as StoreRoles
    from ecpa.runtime.stores.store_roles import init_store as init_store


def _exports() -> dict[str, tuple[str, str]]:
    """Each exported name: the module it lives in and its name there, read from the imports
    under ``TYPE_CHECKING`` above (this file's own text; without it, an install of compiled
    files only, the same imports in its compiled code). Those lines are the one list of the
    facade's names: type checkers read them as imports, this reads them as a table, and
    nothing is imported until a name is asked for."""
    get_source = getattr(__spec__.loader, "get_source", None)  # a file's loader, a zip's too
    source = get_source(__name__) if get_source is not None else None
    found = _from_code() if source is None else _from_source(source)
    table: dict[str, tuple[str, str]] = {}
    for module, name, alias in found:
        if name != alias:  # only the explicit re-export form, ``import X as X``
            raise ImportError(f"{__name__}: expected 'import {name} as {name}', found {alias}")
        table[name] = (module, name)
    if not table:
        raise ImportError(f"{__name__}: expected its exports under TYPE_CHECKING, found none")
    return table


def _from_source(source: str) -> list[tuple[str, str, str]]:
    """The ``from M import X as X`` lines of the ``TYPE_CHECKING`` block: every line from
    the ``if`` to the first that is neither blank nor indented."""
    lines = source.split("\nif TYPE_CHECKING:\n", 1)[1].splitlines()
    end = next((i for i, line in enumerate(lines) if line and not line.startswith(" ")), None)
    block = "\n".join(lines[:end])
    found = _IMPORT.findall(block)
    if len(found) != block.count("from "):  # a line of another form: no silent gap
        raise ImportError(f"{__name__}: expected each export as 'from M import X as X'")
    return found


def _from_code() -> list[tuple[str, str, str]]:
    """The same imports, read from the module's compiled code (``IMPORT_NAME`` of a runtime
    module, then each ``IMPORT_FROM`` and the name it is stored under)."""
    import dis

    code = __spec__.loader.get_code(__name__)  # type: ignore[union-attr]
    found: list[tuple[str, str, str]] = []
    module, name = "", None
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            module, name = str(ins.argval), None
        elif ins.opname == "IMPORT_FROM" and module.startswith(f"{__name__}."):
            name = str(ins.argval)
        elif ins.opname == "STORE_NAME" and name is not None:
            found.append((module, name, str(ins.argval)))
            name = None
    return found


_IMPORT = re.compile(r"^    from ([\w.]+) import \(?\s*(\w+) as (\w+),?\s*\)?$", re.MULTILINE)
_EXPORTS = _exports()
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module on first use (PEP 562)."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ecpa.runtime' has no attribute {name!r}") from None
    loaded = importlib.import_module(module)
    if not hasattr(loaded, attribute):  # a module of a package, as ``from package import``
        importlib.import_module(f"{module}.{attribute}")
    value = getattr(loaded, attribute)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
