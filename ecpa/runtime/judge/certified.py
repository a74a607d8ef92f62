"""Which keys of a launch are trusted (docs/keys.md): the launch's own ``trust.json`` only
as far as the manager's enrollment certificates, checked against the operator's trust store,
back it (:mod:`ecpa.runtime.model.enrollment`). Pure: the stores and the certificates'
bytes are parameters; the reasons say what was found."""

from __future__ import annotations

from ecpa.errors import EcpaError
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.model.enrollment import (
    ENROLLMENTS_FILE,
    read_certificates,
    trusted_keys,
    vouchers_of,
)
from ecpa.runtime.model.launch import ExpectedLaunch

__all__ = ["MAX_SAID", "launch_keys"]

#: Each kind of problem is said for at most this many lines; the rest are counted.
MAX_SAID = 5
_NONE = TrustStore.from_dict({"schema": TRUST_STORE_SCHEMA, "keys": []})


def _said(code: ReasonCode, lines: list[str]) -> list[Reason]:
    reasons = [Reason(code, line) for line in lines[:MAX_SAID]]
    if len(lines) > MAX_SAID:
        reasons.append(Reason(code, f"and {len(lines) - MAX_SAID} more"))
    return reasons


def launch_keys(
    launch_trust: TrustStore,
    expected: ExpectedLaunch,
    *,
    certificates: bytes | EcpaError | None,
    operator: TrustStore | None,
    operator_where: str,
) -> tuple[TrustStore, list[Reason]]:
    """The trust store the launch's evidence is verified with, and the reasons: ``certified``
    when every key of ``launch_trust`` is backed, else ``no_operator_trust``,
    ``enrollment_refused`` (a certificate line refused) or ``uncertified_key`` (a key backed
    by nothing), each failing. ``certificates``: the bytes of ``enrollments.jsonl`` (None:
    there is none; an error: it could not be read); ``operator``: the operator's trust
    store (None: none found, ``operator_where`` says where it was looked for). A 0.1 launch
    has no manager: its keys are backed by the operator's store itself. The texts never
    name where a store found lives: an audit report derived again elsewhere, from the same
    store at another path, is the same report."""
    if operator is None:
        text = (
            f"no operator trust store ({operator_where}): a launch's keys are trusted only "
            "through certificates of a manager key the operator lists (--trust FILE or "
            "$ECPA_TRUST_STORE; docs/keys.md)"
        )
        return _NONE, [Reason(ReasonCode.NO_OPERATOR_TRUST, text)]
    reasons: list[Reason] = []
    if expected.version == "0.1":
        vouched = {(t.entry.issuer, t.entry.kid): t for t in operator}
        by = "entry of the operator's trust store"
        torn = False
    else:
        refused: list[str] = []
        if isinstance(certificates, EcpaError):
            refused.append(f"{ENROLLMENTS_FILE} unreadable: {certificates.detail}")
            certificates = None
        certified = read_certificates(certificates or b"", operator, expected)
        refused += certified.refused
        reasons += _said(ReasonCode.ENROLLMENT_REFUSED, refused)
        vouched = vouchers_of(certified)
        by = (
            "certificate of a manager key the operator's trust store lists "
            f"({ENROLLMENTS_FILE}: {certified.lines} line(s))"
        )
        torn = certified.torn
    store, unbacked = trusted_keys(vouched, launch_trust, by=by)
    reasons += _said(ReasonCode.UNCERTIFIED_KEY, unbacked)
    if not reasons:
        how = (
            "the operator's trust store"
            if expected.version == "0.1"
            else "the manager's certificates, checked against the operator's trust store"
        )
        text = f"{len(store)} key(s) of trust.json backed by {how}"
        if torn:
            text += f"; the last line of {ENROLLMENTS_FILE} is torn (a crash), not read"
        reasons.append(Reason(ReasonCode.CERTIFIED, text))
    return store, reasons
