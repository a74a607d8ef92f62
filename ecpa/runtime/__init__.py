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
from typing import TYPE_CHECKING, Any

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
    from ecpa.runtime.host.launches import judge_launches as judge_launches
    from ecpa.runtime.host.launches import list_launches as list_launches
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

#: Each exported name: the module it lives in, and its name there (None: the module itself).
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "AUDIT_SCHEMA": ("ecpa.runtime.judge.audit", "AUDIT_SCHEMA"),
    "report_bytes": ("ecpa.runtime.judge.audit", "report_bytes"),
    "Audit": ("ecpa.runtime.host.audit", "Audit"),
    "audit_launch_dir": ("ecpa.runtime.host.audit", "audit_launch_dir"),
    "audit_store": ("ecpa.runtime.host.audit", "audit_store"),
    "issued_at_of": ("ecpa.runtime.model.evidence", "issued_at_of"),
    "plot_audit": ("ecpa.runtime.host.audit_plot", "plot_audit"),
    "RECEIPT_SUBJECT": ("ecpa.runtime.host.receipt", "RECEIPT_SUBJECT"),
    "check_receipt": ("ecpa.runtime.host.receipt", "check_receipt"),
    "check_receipt_files": ("ecpa.runtime.host.receipt", "check_receipt_files"),
    "write_receipt": ("ecpa.runtime.host.receipt", "write_receipt"),
    "report_lines": ("ecpa.runtime.judge.audit", "report_lines"),
    "report_digest": ("ecpa.runtime.host.receipt", "report_digest"),
    "sign_receipt": ("ecpa.runtime.host.receipt", "sign_receipt"),
    "BINDING_ENV_NAMES": ("ecpa.runtime.model.process", "BINDING_ENV_NAMES"),
    "BINDING_FIELDS": ("ecpa.runtime.model.process", "BINDING_FIELDS"),
    "COUNTERS_SCHEMA": ("ecpa.runtime.model.counters", "COUNTERS_SCHEMA"),
    "EXIT_SCHEMA": ("ecpa.runtime.model.launch", "EXIT_SCHEMA"),
    "LAUNCH_DIR_NAME": ("ecpa.runtime.host.launches", "LAUNCH_DIR_NAME"),
    "LAUNCH_SUBJECT": ("ecpa.runtime.model.launch", "LAUNCH_SUBJECT"),
    "MAX_LAUNCH_FILE_BYTES": ("ecpa.runtime.model.launch", "MAX_LAUNCH_FILE_BYTES"),
    "MAX_MESSAGE": ("ecpa.runtime.model.enroll", "MAX_MESSAGE"),
    "MAX_RECORD_LENGTH": ("ecpa.runtime.model.evidence", "MAX_RECORD_LENGTH"),
    "MAX_TTL_S": ("ecpa.runtime.model.plan", "MAX_TTL_S"),
    "PLAN_SCHEMA": ("ecpa.runtime.model.plan", "PLAN_SCHEMA"),
    "PROC": ("ecpa.runtime.model.process", "PROC"),
    "PR_SET_CHILD_SUBREAPER": ("ecpa.runtime.model.process", "PR_SET_CHILD_SUBREAPER"),
    "Counters": ("ecpa.runtime.model.counters", "Counters"),
    "CountersProcess": ("ecpa.runtime.model.counters", "CountersProcess"),
    "Evidence": ("ecpa.runtime.model.evidence", "Evidence"),
    "EvidenceLog": ("ecpa.runtime.host.evidence_log", "EvidenceLog"),
    "EvidenceStore": ("ecpa.runtime.stores.store", "EvidenceStore"),
    "StoreRoles": ("ecpa.runtime.stores.store_roles", "StoreRoles"),
    "PrunedDay": ("ecpa.runtime.stores.store_prune", "PrunedDay"),
    "FleetEntry": ("ecpa.runtime.stores.fleet", "FleetEntry"),
    "fleet_status": ("ecpa.runtime.stores.fleet", "fleet_status"),
    "prune_store": ("ecpa.runtime.stores.store_prune", "prune_store"),
    "init_store": ("ecpa.runtime.stores.store_roles", "init_store"),
    "LaunchEnvironment": ("ecpa.runtime.model.process", "LaunchEnvironment"),
    "Judged": ("ecpa.runtime.host.launches", "Judged"),
    "JudgedList": ("ecpa.runtime.host.launches", "JudgedList"),
    "LaunchList": ("ecpa.runtime.host.launches", "LaunchList"),
    "LaunchSummary": ("ecpa.runtime.host.launches", "LaunchSummary"),
    "Membership": ("ecpa.runtime.model.membership", "Membership"),
    "MemoryReplayFence": ("ecpa.runtime.stores.replay", "MemoryReplayFence"),
    "Plan": ("ecpa.runtime.model.plan", "Plan"),
    "PostgresReplayFence": ("ecpa.runtime.stores.replay", "PostgresReplayFence"),
    "ProcessIdentity": ("ecpa.runtime.model.process", "ProcessIdentity"),
    "ReplayFence": ("ecpa.runtime.stores.replay", "ReplayFence"),
    "Request": ("ecpa.runtime.model.enroll", "Request"),
    "RuntimeStatus": ("ecpa.runtime.judge.verdict", "RuntimeStatus"),
    "ShipReport": ("ecpa.runtime.host.ship", "ShipReport"),
    "Slot": ("ecpa.runtime.model.launch", "Slot"),
    "SlotStatus": ("ecpa.runtime.judge.verdict", "SlotStatus"),
    "SqliteReplayFence": ("ecpa.runtime.stores.replay", "SqliteReplayFence"),
    "check_launch_id": ("ecpa.runtime.model.launch", "check_launch_id"),
    "children_now": ("ecpa.runtime.model.membership", "children_now"),
    "children_of": ("ecpa.runtime.model.process", "children_of"),
    "enroll": ("ecpa.runtime.model.enroll", "enroll"),
    "evidence_digest": ("ecpa.runtime.model.evidence", "evidence_digest"),
    "expected_from_dict": ("ecpa.runtime.model.launch", "expected_from_dict"),
    "history": ("ecpa.runtime.judge.history", None),
    "describe_dsn": ("ecpa.runtime.stores.pgconn", "describe_dsn"),
    "scrub_dsn": ("ecpa.runtime.stores.pgconn", "scrub_dsn"),
    "is_postgres_dsn": ("ecpa.runtime.stores.postgres", "is_postgres_dsn"),
    "kid_for": ("ecpa.runtime.model.enroll", "kid_for"),
    "launch_document": ("ecpa.runtime.model.plan", "launch_document"),
    "launch_from_env": ("ecpa.runtime.model.process", "launch_from_env"),
    "judge_launches": ("ecpa.runtime.host.launches", "judge_launches"),
    "list_launches": ("ecpa.runtime.host.launches", "list_launches"),
    "log_name": ("ecpa.runtime.model.enroll", "log_name"),
    "make_undumpable": ("ecpa.runtime.model.process", "make_undumpable"),
    "nonce_for": ("ecpa.runtime.model.enroll", "nonce_for"),
    "open_replay_fence": ("ecpa.runtime.stores.replay", "open_replay_fence"),
    "parse_record": ("ecpa.runtime.model.evidence", "parse_record"),
    "parse_request": ("ecpa.runtime.model.enroll", "parse_request"),
    "plan_from_bytes": ("ecpa.runtime.model.plan", "plan_from_bytes"),
    "plan_from_dict": ("ecpa.runtime.model.plan", "plan_from_dict"),
    "prctl": ("ecpa.runtime.model.process", "prctl"),
    "proc_table": ("ecpa.runtime.model.process", "proc_table"),
    "read_identity": ("ecpa.runtime.model.process", "read_identity"),
    "read_log": ("ecpa.runtime.model.evidence", "read_log"),
    "reply_bytes": ("ecpa.runtime.model.enroll", "reply_bytes"),
    "ship_launch": ("ecpa.runtime.host.ship", "ship_launch"),
    "status_from_files": ("ecpa.runtime.host.status", "status_from_files"),
    "interruptible": ("ecpa.runtime.host.status", "interruptible"),
    "status_from_launch_dir": ("ecpa.runtime.host.status", "status_from_launch_dir"),
    "status_from_store": ("ecpa.runtime.stores.remote", "status_from_store"),
    "update_trust_file": ("ecpa.runtime.host.trust_file", "update_trust_file"),
    "add_trust_entry": ("ecpa.runtime.host.trust_file", "add_trust_entry"),
    "check_trust_addition": ("ecpa.runtime.host.trust_file", "check_trust_addition"),
    "disable_trust_entry": ("ecpa.runtime.host.trust_file", "disable_trust_entry"),
    "trust_entry": ("ecpa.runtime.host.trust_file", "trust_entry"),
    "validity_window": ("ecpa.runtime.host.trust_file", "validity_window"),
    "verify_evidence": ("ecpa.runtime.model.evidence", "verify_evidence"),
    "HOST_EVENT_SCHEMA": ("ecpa.runtime.model.host_event", "HOST_EVENT_SCHEMA"),
    "SCHEDULER_ROLE": ("ecpa.runtime.model.host_event", "SCHEDULER_ROLE"),
    "SINK_TARGET": ("ecpa.runtime.model.host_event", "SINK_TARGET"),
    "HOST_ENV_PREFIX": ("ecpa.runtime.model.host_event", "HOST_ENV_PREFIX"),
    "HostEvent": ("ecpa.runtime.model.host_event", "HostEvent"),
    "HostEventCode": ("ecpa.runtime.model.host_ids", "HostEventCode"),
    "HostEventRefused": ("ecpa.runtime.model.host_ids", "HostEventRefused"),
    "ProcessClaim": ("ecpa.runtime.model.host_binding", "ProcessClaim"),
    "check_binding": ("ecpa.runtime.model.host_binding", "check_binding"),
    "host_line": ("ecpa.runtime.model.host_event", "host_line"),
    "parse_host_line": ("ecpa.runtime.model.host_event", "parse_host_line"),
    "check_host_event": ("ecpa.runtime.model.host_event", "check_host_event"),
    "event_id_of": ("ecpa.runtime.model.host_ids", "event_id_of"),
    "dispatch_id_of": ("ecpa.runtime.model.host_ids", "dispatch_id_of"),
    "epoch_of": ("ecpa.runtime.model.host_ids", "epoch_of"),
    "DISPATCH_OUTCOMES": ("ecpa.runtime.model.host_event", "DISPATCH_OUTCOMES"),
    "HostBook": ("ecpa.runtime.model.host_journal", "HostBook"),
    "JOURNAL_DIR": ("ecpa.runtime.model.host_journal", "JOURNAL_DIR"),
    "JournalCheck": ("ecpa.runtime.model.host_journal", "JournalCheck"),
    "check_journal": ("ecpa.runtime.model.host_journal", "check_journal"),
    "chain_step": ("ecpa.runtime.model.host_journal", "chain_step"),
    "HostCounts": ("ecpa.runtime.model.counters", "HostCounts"),
    "CERTIFY_SUBJECT": ("ecpa.runtime.model.enrollment", "CERTIFY_SUBJECT"),
    "ENROLLMENTS_FILE": ("ecpa.runtime.model.enrollment", "ENROLLMENTS_FILE"),
    "MANAGER_ISSUER": ("ecpa.runtime.model.enrollment", "MANAGER_ISSUER"),
    "Enrollment": ("ecpa.runtime.model.enrollment", "Enrollment"),
    "certificate_line": ("ecpa.runtime.model.enrollment", "certificate_line"),
    "launch_certificate_line": ("ecpa.runtime.model.enrollment", "launch_certificate_line"),
    "manager_kid": ("ecpa.runtime.model.enrollment", "manager_kid"),
    "MANAGER_KEY_ENV": ("ecpa.runtime.stores.operator", "MANAGER_KEY_ENV"),
    "TRUST_ENV": ("ecpa.runtime.stores.operator", "TRUST_ENV"),
    "OperatorTrust": ("ecpa.runtime.stores.operator", "OperatorTrust"),
    "default_manager_key": ("ecpa.runtime.stores.operator", "default_manager_key"),
    "default_trust_store": ("ecpa.runtime.stores.operator", "default_trust_store"),
    "operator_trust": ("ecpa.runtime.stores.operator", "operator_trust"),
    "ExpectedLaunch": ("ecpa.runtime.model.launch", "ExpectedLaunch"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module on first use (PEP 562)."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ecpa.runtime' has no attribute {name!r}") from None
    loaded = importlib.import_module(module)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
