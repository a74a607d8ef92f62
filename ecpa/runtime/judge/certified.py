"""Which keys of a launch are trusted, and whether its ``launch.json`` is (docs/keys.md): the
launch's own ``trust.json`` only as far as the manager's certificates, checked against the
operator's trust store, back it (:mod:`ecpa.runtime.model.certificates`). Pure: the stores,
the files' bytes are parameters; the reasons say what was found."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.json.strict_json import parse_object
from ecpa.profile.trust import TRUST_STORE_SCHEMA, TrustStore
from ecpa.runtime.judge.memo import Memo, digest
from ecpa.runtime.judge.reasons import Reason, ReasonCode
from ecpa.runtime.model.certificates import (
    identities_of,
    read_certificates,
    trusted_keys,
    vouchers_of,
)
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE
from ecpa.runtime.model.launch import ExpectedLaunch
from ecpa.runtime.model.process import ProcessIdentity

__all__ = [
    "MAX_SAID",
    "MEMO_KEYS",
    "LaunchKeys",
    "launch_keys",
    "launch_trust_store",
    "store_content",
]

#: Each kind of problem is said for at most this many lines; the rest are counted.
MAX_SAID = 5
_NONE = TrustStore.from_dict({"schema": TRUST_STORE_SCHEMA, "keys": []})
#: How many launches' keys a process remembers (:mod:`~ecpa.runtime.judge.memo`), added
#: up over the launches, and as many keys of parsed ``trust.json`` files: twice a fleet of
#: 10,000 scheduler processes (about 1.8 kB a key remembered: 36 MB each at most).
MEMO_KEYS = 20_000
_JUDGED: Memo[tuple[object, ...], LaunchKeys] = Memo("launch keys", MEMO_KEYS)
_PARSED: Memo[bytes, TrustStore] = Memo("launch trust stores", MEMO_KEYS)


@dataclass(frozen=True)
class LaunchKeys:
    """The trust a launch's evidence is judged under."""

    #: The keys of ``trust.json`` that are backed, as the verifier takes them.
    store: TrustStore
    #: ``certified`` (passes) or the failing reasons.
    reasons: tuple[Reason, ...]
    #: The process each certified key was enrolled for (empty for a 0.1 launch).
    identities: Mapping[str, ProcessIdentity] = field(default_factory=dict)

    @property
    def failing(self) -> tuple[Reason, ...]:
        """The reasons that make the launch not effective."""
        return tuple(r for r in self.reasons if r.fails)


def _said(code: ReasonCode, lines: list[str]) -> list[Reason]:
    reasons = [Reason(code, line) for line in lines[:MAX_SAID]]
    if len(lines) > MAX_SAID:
        reasons.append(Reason(code, f"and {len(lines) - MAX_SAID} more"))
    return reasons


def launch_trust_store(data: bytes, what: str) -> TrustStore:
    """A launch's ``trust.json`` from its bytes ``data`` (``what`` names it in errors), the
    same store for the same bytes (remembered, :data:`MEMO_KEYS` keys of them; a store is
    never changed once built).

    Raises:
        EcpaError: ``ATTESTATION_TRUST_STORE_CONFIG`` for bytes that are not strict JSON or
            not a trust store document (PROFILE §5).
    """
    key = digest(data)
    found = _PARSED.get(key)
    if found is not None:
        return found
    try:
        store = TrustStore.from_dict(parse_object(data, what=what))
    except EcpaError as exc:
        if exc.code is ErrorCode.TRUST_STORE_CONFIG:
            raise
        raise EcpaError(ErrorCode.TRUST_STORE_CONFIG, exc.detail) from None
    return _PARSED.put(key, store, len(store))


def store_content(store: TrustStore) -> tuple[tuple[object, ...], ...]:
    """What a judgement reads of each entry of ``store``, in order: issuer, kid, the raw
    public key, subjects, enabled and window. Equal for two stores that judge alike."""
    return tuple(
        (
            t.entry.issuer,
            t.entry.kid,
            t.key.raw,
            tuple(t.entry.subjects),
            t.entry.enabled,
            t.entry.not_before,
            t.entry.not_after,
        )
        for t in store
    )


def _named(content: tuple[tuple[object, ...], ...]) -> bytes:
    """A store's content by its SHA-256 (its ``repr``: text, bytes, booleans and integers
    only, each written one way), so that a key remembered holds 32 bytes a store, not the
    store: an operator's store that lists every host's manager key is in every key."""
    return digest(repr(content).encode())


def launch_keys(
    launch_trust: TrustStore,
    expected: ExpectedLaunch,
    *,
    launch_doc: bytes,
    certificates: bytes | EcpaError | None,
    operator: TrustStore | None,
    operator_where: str,
) -> LaunchKeys:
    """The trust the evidence of the launch ``expected`` (read from ``launch_doc``) is judged
    under, and the reasons: ``certified`` when ``launch.json`` is the one the manager sealed
    and every key of ``launch_trust`` is backed, else ``no_operator_trust``,
    ``enrollment_refused`` (a certificate line refused, or none sealing ``launch.json``) or
    ``uncertified_key`` (a key backed by nothing), each failing. ``certificates``: the bytes
    of ``enrollments.jsonl`` (None: there is none; an error: it could not be read);
    ``operator``: the operator's trust store (None: none found, ``operator_where`` says where
    it was looked for). A 0.1 launch has no manager: its keys are backed by the operator's
    store itself, and a 0.1 launch with certificates is refused (a 0.2 launch rewritten).
    The texts never name where a store found lives: an audit report derived again
    elsewhere, from the same store at another path, is the same report.

    Remembered (launches of :data:`MEMO_KEYS` keys in all): the same inputs, by content, give the
    answer judged before, which reads no clock (each certificate is judged as of its issue).
    """
    if isinstance(certificates, EcpaError):
        read: object = (certificates.code, certificates.detail)
    else:
        read = None if certificates is None else digest(certificates)
    key = (
        _named(store_content(launch_trust)),
        expected,
        digest(launch_doc),
        read,
        None if operator is None else _named(store_content(operator)),
        operator_where,
    )
    found = _JUDGED.get(key)
    if found is None:
        judged = _judge_keys(
            launch_trust, expected, launch_doc, certificates, operator, operator_where
        )
        found = _JUDGED.put(key, judged, len(launch_trust))
    return found


def _judge_keys(
    launch_trust: TrustStore,
    expected: ExpectedLaunch,
    launch_doc: bytes,
    certificates: bytes | EcpaError | None,
    operator: TrustStore | None,
    operator_where: str,
) -> LaunchKeys:
    """:func:`launch_keys`, judged."""
    if operator is None:
        text = (
            f"no operator trust store ({operator_where}): a launch's keys are trusted only "
            "through certificates of a manager key the operator lists (--trust FILE or "
            "$ECPA_TRUST_STORE; docs/keys.md)"
        )
        return LaunchKeys(
            _NONE, (Reason(ReasonCode.NO_OPERATOR_TRUST, text),), MappingProxyType({})
        )
    reasons: list[Reason] = []
    identities: dict[str, ProcessIdentity] = {}
    torn = False
    if expected.version == "0.1":
        vouched = {(t.entry.issuer, t.entry.kid): t for t in operator}
        by = "entry of the operator's trust store"
        if certificates is not None:
            text = f"a 0.1 launch (no manager) with the manager's {ENROLLMENTS_FILE}: refused"
            reasons.append(Reason(ReasonCode.ENROLLMENT_REFUSED, text))
    else:
        refused: list[str] = []
        if isinstance(certificates, EcpaError):
            refused.append(f"{ENROLLMENTS_FILE} unreadable: {certificates.detail}")
            certificates = None
        certified = read_certificates(certificates or b"", operator, expected, launch_doc)
        refused += certified.refused
        if certified.unread:
            refused.append(f"{certified.unread} later line(s) of {ENROLLMENTS_FILE} not read")
        elif not refused and not certified.sealed:
            refused.append(
                f"no certificate of the manager seals launch.json ({ENROLLMENTS_FILE}: "
                f"{certified.lines} line(s)): its slots, windows and supervisor are not trusted"
            )
        reasons += _said(ReasonCode.ENROLLMENT_REFUSED, refused)
        vouched = vouchers_of(certified)  # as far as read: false anyway when one is refused
        identities = identities_of(certified)
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
        if expected.version != "0.1":
            text += "; launch.json as the manager sealed it"
        if torn:
            text += f"; the last line of {ENROLLMENTS_FILE} is torn (a crash), not read"
        reasons.append(Reason(ReasonCode.CERTIFIED, text))
    return LaunchKeys(store, tuple(reasons), MappingProxyType(identities))
