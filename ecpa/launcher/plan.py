"""Where ``ecpa run`` gets its plan: a plan file, or the DLA bundle installed beside it.

The bundle is found through installed metadata only, as the vLLM-HUST host finds it (the
entry point group ``vllm.extension_bundles``, name = the bundle id, value = the module
directory holding exactly one ``vllm-hust-extension-v1.json`` or the older
``extension-bundle-v1.json``): ``ecpa`` never imports the plugin by name, and the artifact
digest is the SHA-256 of the bundle's manifest bytes as installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import socket
from pathlib import Path

from ecpa._files import read_bounded
from ecpa.errors import EcpaError, ErrorCode, invalid_input
from ecpa.profile.json.strict_json import parse_object
from ecpa.runtime import PLAN_SCHEMA, Plan, plan_from_bytes, plan_from_dict

BUNDLE_GROUP = "vllm.extension_bundles"
#: The manifest's file names the host accepts, the current one first.
MANIFEST_NAMES = ("vllm-hust-extension-v1.json", "extension-bundle-v1.json")
BUNDLE_NAME = "org.vllm-hust.dla"
DEFAULT_PLUGIN_ID = "org.vllm-hust.dla/victim-selector"
_MAX_PLAN_BYTES = 1 << 20
_MAX_MANIFEST_BYTES = 16 << 20


def default_issuer(host: str | None = None) -> str:
    """``urn:ecpa:issuer:<host>``, this host's name by default."""
    return f"urn:ecpa:issuer:{host or socket.gethostname()}"


def load_plan(path: Path, *, issuer: str | None = None) -> Plan:
    """The plan in the file at ``path`` (schema ``ecpa-plan/0.1``, at most 1 MiB); its
    issuer defaults to ``issuer``, else :func:`default_issuer`.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for an unreadable file, JSON that is not strict,
            or a plan that breaks a rule (naming the member).
    """
    data = read_bounded(path, _MAX_PLAN_BYTES, ErrorCode.INVALID_INPUT)
    return plan_from_bytes(data, f"plan {path}", default_issuer=issuer or default_issuer())


def _bundle_package() -> str:
    found = importlib.metadata.entry_points(group=BUNDLE_GROUP)
    values = sorted({ep.value for ep in found if ep.name == BUNDLE_NAME})
    if not values:
        raise invalid_input(
            f"expected --plan FILE or an installed {BUNDLE_NAME} bundle, found none"
        )
    if len(values) > 1:  # never pick one of two installed bundles silently
        raise invalid_input(
            f"expected one installed {BUNDLE_NAME} bundle, found {len(values)}: {values}"
        )
    value = values[0]
    if not all(part.isidentifier() for part in value.split(".")):
        raise invalid_input(
            f"expected entry point {BUNDLE_NAME!r} of {BUNDLE_GROUP!r} to name a package "
            f"directory, found {value!r}"
        )
    return value


def bundle_manifest() -> tuple[str, bytes]:
    """The installed DLA bundle's manifest: its location and its exact bytes.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` when no bundle (or more than one) is installed,
            its package cannot be opened, or it holds other than exactly one of
            :data:`MANIFEST_NAMES`.
    """
    package = _bundle_package()
    try:
        root = importlib.resources.files(package)
        manifests = sorted(
            (item for item in root.iterdir() if item.name in MANIFEST_NAMES and item.is_file()),
            key=lambda item: item.name,
        )
        if len(manifests) != 1:
            names = [item.name for item in manifests]
            raise invalid_input(
                f"expected exactly one manifest ({' or '.join(MANIFEST_NAMES)}) in bundle "
                f"package {package!r}, found {names}"
            )
        with manifests[0].open("rb") as fh:
            data = fh.read(_MAX_MANIFEST_BYTES + 1)
    except EcpaError:
        raise
    except Exception as exc:  # importing someone else's package may fail in any way
        raise invalid_input(
            f"expected the {BUNDLE_NAME} bundle package {package!r} to be readable, "
            f"found {type(exc).__name__}: {exc}"
        ) from None
    if len(data) > _MAX_MANIFEST_BYTES:
        raise invalid_input(
            f"expected a manifest of at most {_MAX_MANIFEST_BYTES} bytes, found more"
        )
    return f"{package}/{manifests[0].name}", data


def bundle_policy(manifest: bytes, plugin_id: str = DEFAULT_PLUGIN_ID) -> str | None:
    """The policy name the host gives the bundle's component ``plugin_id`` when it resolves
    it as a typed preemption policy: its ``implementation_ref`` ``module:Class`` read as
    ``module.Class`` (the host names a policy by its class's module and qualified name);
    None when the manifest names no such component."""
    try:
        doc = parse_object(manifest, what="bundle manifest")
        bundle = doc.get("bundle_id")
        refs = [
            c.get("implementation_ref")
            for c in doc.get("components", [])
            if isinstance(c, dict) and f"{bundle}/{c.get('component_id')}" == plugin_id
        ]
    except (EcpaError, AttributeError, TypeError):
        refs = []
    if len(refs) != 1 or not isinstance(refs[0], str) or refs[0].count(":") != 1:
        return None
    return refs[0].replace(":", ".")


def with_host_evidence(plan: Plan, mode: str) -> Plan:
    """``plan`` with ``host_evidence`` ``mode`` (``"required"`` or ``"off"``). Required with
    no ``host_policy``: the installed bundle's, for the bundle's own plugin.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` for another mode, or host evidence required of
            another plugin without the plan naming its ``host_policy``.
    """
    doc = {**plan.to_dict(), "host_evidence": mode}
    if mode == "required" and plan.host_policy is None:
        if plan.plugin_id != DEFAULT_PLUGIN_ID:
            raise invalid_input(
                f"expected the plan's host_policy (the policy's module.Class, as the host "
                f"names it) with host evidence required of plugin {plan.plugin_id!r}, found none"
            )
        where, manifest = bundle_manifest()
        doc["host_policy"] = bundle_policy(manifest)
        if doc["host_policy"] is None:
            raise invalid_input(
                f"expected the bundle manifest {where} to name component {plan.plugin_id} "
                "with an implementation_ref module:Class (the host's policy name), found none"
            )
    return plan_from_dict(doc, "--host-evidence", default_issuer=plan.issuer)


def default_plan(*, issuer: str | None = None) -> Plan:
    """The plan for the installed DLA bundle: plugin ``org.vllm-hust.dla/victim-selector``,
    artifact digest the SHA-256 of its manifest's bytes, ``host_policy`` the name the host
    gives its component as a preemption policy (when the manifest names it), every other
    member its default
    (``plan_id`` the digest of the resolved plan, see
    :func:`ecpa.runtime.model.launch.plan_from_dict`).

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` as :func:`bundle_manifest`.
    """
    where, data = bundle_manifest()
    doc: dict[str, object] = {
        "schema": PLAN_SCHEMA,
        "plugin_id": DEFAULT_PLUGIN_ID,
        "artifact_digest": "sha256:" + hashlib.sha256(data).hexdigest(),
    }
    policy = bundle_policy(data)
    if policy is not None:
        doc["host_policy"] = policy
    return plan_from_dict(
        doc, f"default plan for {where}", default_issuer=issuer or default_issuer()
    )
