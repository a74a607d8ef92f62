"""``ecpa run``'s manager key and the certificates it signs (docs/keys.md).

The manager key is the one thing, besides code inside a live scheduler process, that can make
a launch effective: it signs an enrollment certificate
(:mod:`ecpa.runtime.model.enrollment`) for each process key ``ecpa run`` enrolls, and the
readers trust a process key only through one, checked against the operator's trust store.

Where the key is: ``--manager-key`` (a PEM file, or a ``pkcs11:`` URI of a key in a token:
:mod:`ecpa.hsm`), else ``$ECPA_MANAGER_KEY``, else ``$XDG_CONFIG_HOME/ecpa/manager-key.pem``,
made on first use (mode 0600, its directory 0700), its public key then added to the
operator's default trust store (created if missing) so that ``ecpa status`` on this host
trusts it. An encrypted key file's passphrase comes from ``$ECPA_KEY_PASSWORD``; a token's
PIN as :mod:`ecpa.hsm` says. Neither ever reaches the launched command.

:class:`Certifier` appends certificates to ``enrollments.jsonl`` in the launch directory
(through its descriptor: wherever the directory is moved), one ``write`` per line with
``O_APPEND``, synced before the enrollment is answered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ecpa._files import write_file
from ecpa.errors import EcpaError, invalid_input
from ecpa.profile.keys import Ed25519Signer, SigningKey
from ecpa.runtime import (
    CERTIFY_SUBJECT,
    ENROLLMENTS_FILE,
    MANAGER_ISSUER,
    MANAGER_KEY_ENV,
    Enrollment,
    ExpectedLaunch,
    OperatorTrust,
    ProcessIdentity,
    add_trust_entry,
    certificate_line,
    default_manager_key,
    default_trust_store,
    launch_certificate_line,
    manager_kid,
    operator_trust,
    trust_entry,
)

__all__ = ["Certifier", "ManagerKey", "load_manager_key"]

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_PASSWORD_ENV = "ECPA_KEY_PASSWORD"  # noqa: S105 (a variable's name)


@dataclass
class ManagerKey:
    """The manager's signing key, its key id, and where it came from (for messages)."""

    signer: Ed25519Signer
    source: str
    #: Whether it was made just now (first use of the default file).
    created: bool = False

    @property
    def kid(self) -> str:
        """Its key id in an operator's trust store (``manager-`` and 16 hex digits)."""
        return manager_kid(self.signer.public_key)

    def unlisted(self, operator: OperatorTrust, now: int | None = None) -> str | None:
        """What to say when ``operator`` (the operator's trust store, as found) does not
        trust this key for certificates at ``now`` (default: the clock), so that every
        status of the launch would be false; None when it does."""
        at = int(time.time()) if now is None else now
        store = operator.store
        found = None if store is None else store.lookup(MANAGER_ISSUER, self.kid)
        if (
            found is not None
            and found.key == self.signer.public_key
            and found.entry.enabled
            and CERTIFY_SUBJECT in found.entry.subjects
        ):
            if found.entry.not_before <= at <= found.entry.not_after:
                return None
            return (
                f"the operator's trust store ({operator.where}) trusts the manager key "
                f"{self.kid} from {found.entry.not_before} to {found.entry.not_after}, not "
                f"now ({at}): every status of this launch will be false"
            )
        where = operator.where if store is not None else str(default_trust_store())
        return (
            f"the operator's trust store ({operator.where}) does not trust the manager key "
            f"{self.kid} ({self.source}) for {CERTIFY_SUBJECT}: every status of this launch "
            f"will be false. Add it: {self.trust_command(where)}"
        )

    def notes(self) -> list[str]:
        """What ``ecpa run`` says about this key before the command starts: that it was
        made, and whether the operator's trust store (:func:`operator_trust`) trusts it."""
        said = []
        if self.created:
            said.append(
                f"made the manager key {self.source} (first use) and added it to "
                f"{default_trust_store()} (docs/keys.md)"
            )
        try:
            unlisted = self.unlisted(operator_trust())
        except EcpaError as exc:
            unlisted = f"the operator's trust store is unusable: {exc.detail}"
        return said + ([unlisted] if unlisted else [])

    def trust_command(self, store: str) -> str:
        """The command that adds this key to the operator's trust store ``store``."""
        return (
            f"ecpa trust add {store} --issuer {MANAGER_ISSUER} --kid {self.kid} "
            f"--subject {CERTIFY_SUBJECT} --key '{self.source}'"
        )


def _create_default(path: Path, environ: Mapping[str, str]) -> ManagerKey | None:
    """The first use of the default key file: made, and trusted by the default store; None
    when another ``ecpa run`` made it first (then it is read like any key file)."""
    key = SigningKey.generate()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_file(path, key.to_pem(), mode=0o600, replace=False)
    except FileExistsError:
        return None
    except OSError as exc:
        raise invalid_input(
            f"expected to make the manager key {path}, found: {exc.strerror or exc}"
        ) from None
    made = ManagerKey(key, str(path), created=True)
    entry = trust_entry(MANAGER_ISSUER, made.kid, key.public_key, [CERTIFY_SUBJECT], (0, 2**53 - 1))
    add_trust_entry(default_trust_store(environ), entry)
    return made


def load_manager_key(
    spec: str | None = None, *, environ: Mapping[str, str] | None = None
) -> ManagerKey:
    """The manager key named by ``spec`` (a key file or a ``pkcs11:`` URI), else by
    ``$ECPA_MANAGER_KEY``, else the default file, made on first use (see the module's text).

    Raises:
        EcpaError: ``ECPA_INVALID_KEY`` for a key that cannot be read or used (a file
            others may read, a wrong passphrase or PIN, a token without the key);
            ``ECPA_INVALID_INPUT`` when the default key cannot be made.
    """
    env = os.environ if environ is None else environ
    named = spec or env.get(MANAGER_KEY_ENV) or None
    if named is None:
        path = default_manager_key(env)
        made = None if os.path.lexists(path) else _create_default(path, env)
        if made is not None:
            return made
        named = str(path)
    from ecpa.hsm import load_signer

    return ManagerKey(load_signer(named, None, hint=f" (${_PASSWORD_ENV})"), named)


@dataclass
class Certifier:
    """The certificates of one launch, appended to its ``enrollments.jsonl``."""

    manager: ManagerKey
    launch: ExpectedLaunch
    #: The launch directory (for messages) and, when given, its open descriptor.
    directory: Path
    dir_fd: int | None = None
    seq: int = 0
    certified: dict[str, Enrollment] = field(default_factory=dict)

    def seal(self, launch_doc: bytes, supervisor: ProcessIdentity, *, now: int) -> None:
        """Write the first certificate: the seal on ``launch_doc`` (``launch.json``'s exact
        bytes), naming the ``supervisor``; before the command starts.

        Raises:
            EcpaError: as :meth:`certify`; ``ECPA_INVALID_INPUT`` when it is not the first.
        """
        if self.seq != 0:
            raise invalid_input("expected the launch sealed first, found certificates before")
        line = launch_certificate_line(
            self.launch, launch_doc, supervisor, self.manager.signer, issued_at=now
        )
        self._append(line)
        self.seq = 1

    def _append(self, line: bytes) -> None:
        where = self.directory / ENROLLMENTS_FILE
        name = ENROLLMENTS_FILE if self.dir_fd is not None else str(where)
        try:
            fd = os.open(name, _APPEND, 0o600, dir_fd=self.dir_fd)
        except OSError as exc:
            raise invalid_input(f"expected to append to {where}, found: {exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, line)
                if written != len(line):  # never half a certificate: taken back
                    os.ftruncate(fd, size)
                    raise OSError(0, f"a short write ({written} of {len(line)} bytes)")
                os.fsync(fd)
            except OSError as exc:
                raise invalid_input(
                    f"expected to append a certificate to {where}, found: {exc.strerror}"
                ) from None
        finally:
            os.close(fd)

    def certify(self, enrollment: Enrollment, *, now: int) -> Enrollment:
        """Sign and append the certificate of ``enrollment`` (its ``seq`` the next one);
        return it as certified. A key already certified for the same process is not
        certified again (an enrollment retried after its ``trust.json`` write failed).

        Raises:
            EcpaError: ``ECPA_INVALID_INPUT`` when it cannot be written, or for another key
                of a process already certified; what the manager's key raises (a token
                gone: ``ECPA_INVALID_KEY``).
        """
        known = self.certified.get(enrollment.kid)
        if known is not None and enrollment.event == "enrolled":
            if (known.public_key_b64, known.identity) != (
                enrollment.public_key_b64,
                enrollment.identity,
            ):
                raise invalid_input(
                    f"expected one key for {enrollment.kid}, found another after it was "
                    "certified (one key per process)"
                )
            return known
        numbered = Enrollment(
            self.seq + 1,
            enrollment.event,
            enrollment.issuer,
            enrollment.kid,
            enrollment.public_key_b64,
            enrollment.subjects,
            enrollment.slot,
            enrollment.identity,
            enrollment.not_before,
            enrollment.not_after,
        )
        line = certificate_line(numbered, self.launch, self.manager.signer, issued_at=now)
        self._append(line)
        self.seq = numbered.seq
        if numbered.event == "enrolled":
            self.certified[numbered.kid] = numbered
        return numbered

    def close_all(self, ended_at: int, *, now: int) -> list[str]:
        """A ``closed`` certificate for each key certified, its window ending at
        ``ended_at``; what could not be written (each attempted)."""
        problems: list[str] = []
        for kid, enrolled in list(self.certified.items()):
            end = max(enrolled.not_before, min(enrolled.not_after, ended_at))
            closing = Enrollment(
                0,
                "closed",
                enrolled.issuer,
                kid,
                enrolled.public_key_b64,
                enrolled.subjects,
                enrolled.slot,
                enrolled.identity,
                enrolled.not_before,
                end,
            )
            try:
                self.certify(closing, now=now)
            except EcpaError as exc:
                problems.append(f"closing {kid} in {ENROLLMENTS_FILE}: {exc.detail}")
        return problems
