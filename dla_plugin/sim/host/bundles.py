"""A model of vLLM-HUST's extension bundles (DLA.md "Identity"): the manifest v1 rules, the
discovery of installed bundles, and the admission that yields the components a typed host
path may load. It models the facts of the host's ``vllm/plugins/manifest.schema.json``, its
manifest parser, its installed-bundle discovery and its startup admission; none of the host's
code or schema text is copied.

- Discovery: entry point group ``vllm.extension_bundles``; the name is the bundle id, the
  value a dotted module path (no attribute, no extras, no file path) whose directory holds
  exactly one of ``vllm-hust-extension-v1.json`` or (older) ``extension-bundle-v1.json``,
  found in the distribution's installed files, or for an editable install under the project
  directory its ``direct_url.json`` names (or its ``src/``). No code is imported.
- The manifest (:func:`check_manifest`): members ``schema_version`` ("1.0"), ``bundle_id``,
  ``bundle_version`` (semver), ``host_api_range`` (comparators such as ``>=1.0,<2``),
  ``components``, and no others; each component ``component_id``, ``contracts``,
  ``execution_planes``, ``isolation``, ``implementation_ref``, optional ``permissions``, and
  no others. The bundle id must equal the entry point's name.
- Admission (:func:`resolve_startup`): the host's API version ("1.0") must satisfy the range;
  only ``trusted_in_process`` isolation runs in process; permissions must be allowed (none
  are by default).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = [
    "BUNDLES_GROUP",
    "HOST_API_VERSION",
    "MANIFEST_FILENAMES",
    "BundleError",
    "InstalledBundle",
    "ResolvedComponent",
    "check_manifest",
    "discover_installed",
    "resolve_startup",
]

BUNDLES_GROUP = "vllm.extension_bundles"
MANIFEST_FILENAMES = ("vllm-hust-extension-v1.json", "extension-bundle-v1.json")
HOST_API_VERSION = "1.0"

CONTRACTS = frozenset(
    {
        "vllm.kv_connector.scheduler.v1",
        "vllm.kv_connector.worker.v1",
        "vllm.kv_connector.telemetry.v1",
        "vllm.scheduler.policy.v1",
        "vllm.platform.v1",
        "vllm.operator.v1",
        "vllm.model_runner.v1",
        "vllm.io_processor.v1",
        "vllm.stat_logger.v1",
        "vllm.telemetry.exporter.v1",
        "vllm.control.action.v1",
        "vllm.control.receipt.v1",
    }
)
PLANES = frozenset({"api", "scheduler", "worker", "native", "device", "bridge"})
ISOLATIONS = frozenset({"trusted_in_process", "process_isolated", "sandboxed_process"})
PERMISSIONS = frozenset(
    {
        "device_access",
        "filesystem_read",
        "filesystem_write",
        "ipc",
        "network_egress",
        "shared_memory",
        "subprocess",
    }
)
_TOP = ("schema_version", "bundle_id", "bundle_version", "host_api_range", "components")
_COMPONENT = ("component_id", "contracts", "execution_planes", "isolation", "implementation_ref")
_IDENTIFIER = re.compile(r"[a-z0-9][a-z0-9.-]*")
_SEMVER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")
_CLAUSE = re.compile(r"(>=|<=|==|!=|>|<)([0-9]+(?:\.[0-9]+){0,2})")
_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


class BundleError(ValueError):
    """A bundle the host refuses (the engine does not start)."""


@dataclass(frozen=True)
class ResolvedComponent:
    """An admitted component: ``qualified_id`` is ``<bundle_id>/<component_id>``."""

    bundle_id: str
    bundle_version: str
    component_id: str
    contracts: tuple[str, ...]
    execution_planes: tuple[str, ...]
    isolation: str
    implementation_ref: str
    permissions: tuple[str, ...]

    @property
    def qualified_id(self) -> str:
        """``<bundle_id>/<component_id>``."""
        return f"{self.bundle_id}/{self.component_id}"


@dataclass(frozen=True)
class InstalledBundle:
    """A bundle found through installed metadata."""

    bundle_id: str
    distribution: str
    version: str
    manifest_path: Path
    manifest: dict[str, Any]


def _string(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise BundleError(f"{where} must be a non-empty string")
    return value


def _strings(value: object, where: str, allowed: frozenset[str], *, empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BundleError(f"{where} must be an array of strings")
    if not value and not empty:
        raise BundleError(f"{where} must not be empty")
    if len(set(value)) != len(value):
        raise BundleError(f"{where} must be unique")
    if any(v not in allowed for v in value):
        raise BundleError(f"{where} contains an unsupported value")
    return tuple(value)


def _members(obj: object, where: str, required: Sequence[str], optional: Sequence[str]) -> dict:  # type: ignore[type-arg]
    if not isinstance(obj, dict):
        raise BundleError(f"{where} must be an object")
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise BundleError(f"{where} contains unknown fields: {unknown}")
    missing = [k for k in required if k not in obj]
    if missing:
        raise BundleError(f"{where} is missing fields: {missing}")
    return obj


def check_manifest(doc: object) -> tuple[ResolvedComponent, ...]:
    """The components of a manifest v1 that follows the host's rules.

    Raises:
        BundleError: naming the first rule broken (member, value or uniqueness).
    """
    top = _members(doc, "manifest", _TOP, ())
    if top["schema_version"] != "1.0":
        raise BundleError("unsupported extension bundle schema_version")
    bundle_id = _string(top["bundle_id"], "bundle_id")
    if not _IDENTIFIER.fullmatch(bundle_id):
        raise BundleError("bundle_id must use lowercase letters, digits, dots, or hyphens")
    version = _string(top["bundle_version"], "bundle_version")
    if not _SEMVER.fullmatch(version):
        raise BundleError("bundle_version must be a semantic version")
    api_range = _string(top["host_api_range"], "host_api_range")
    check_api_range(api_range)
    components = top["components"]
    if not isinstance(components, list):
        raise BundleError("components must be an array")
    if not components:
        raise BundleError("a bundle must contain at least one component")
    out: list[ResolvedComponent] = []
    for n, raw in enumerate(components):
        where = f"components[{n}]"
        comp = _members(raw, where, _COMPONENT, ("permissions",))
        cid = _string(comp["component_id"], f"{where}.component_id")
        if not _IDENTIFIER.fullmatch(cid):
            raise BundleError("component_id must use lowercase letters, digits, dots, or hyphens")
        isolation = comp["isolation"]
        if isolation not in ISOLATIONS:
            raise BundleError(f"{where}.isolation is unsupported")
        out.append(
            ResolvedComponent(
                bundle_id,
                version,
                cid,
                _strings(comp["contracts"], f"{where}.contracts", CONTRACTS, empty=False),
                _strings(
                    comp["execution_planes"], f"{where}.execution_planes", PLANES, empty=False
                ),
                isolation,
                _string(comp["implementation_ref"], f"{where}.implementation_ref"),
                _strings(
                    comp.get("permissions", []), f"{where}.permissions", PERMISSIONS, empty=True
                ),
            )
        )
    if len({c.component_id for c in out}) != len(out):
        raise BundleError("component ids must be unique within a bundle")
    return tuple(out)


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple([*parts, 0, 0][:3])


def check_api_range(api_range: str, host: str = HOST_API_VERSION) -> bool:
    """Whether ``host`` satisfies ``api_range`` (clauses joined by ``,``, all must hold).

    Raises:
        BundleError: for a range outside the grammar (``>=1.0,<2``, no spaces).
    """
    have = _version(host)
    ok = True
    for clause in api_range.split(","):
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            raise BundleError(f"invalid host_api_range clause: {clause!r}")
        op, want = match.group(1), _version(match.group(2))
        ok &= {
            ">=": have >= want,
            "<=": have <= want,
            "==": have == want,
            "!=": have != want,
            ">": have > want,
            "<": have < want,
        }[op]
    return ok


def _editable_roots(dist: Any) -> list[Path]:
    text = dist.read_text("direct_url.json")
    if not text:
        return []
    try:
        info = json.loads(text)
    except ValueError:
        raise BundleError("editable distribution has invalid direct_url.json metadata") from None
    if not isinstance(info, dict) or (info.get("dir_info") or {}).get("editable") is not True:
        return []
    url = urlparse(str(info.get("url", "")))
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        raise BundleError("editable Bundle registration must use a local file direct URL")
    root = Path(unquote(url.path))
    if not root.is_absolute():
        raise BundleError("editable Bundle registration has a non-absolute project path")
    return [root, root / "src"]


def _manifest_path(name: str, value: str, dist: Any) -> Path:
    if not _MODULE_PATH.fullmatch(value):
        raise BundleError(
            f"installed Bundle {name!r} must register a static module directory without an "
            "attribute, extras, or filesystem path"
        )
    files = dist.files
    if files is None:
        raise BundleError(
            f"distribution for installed Bundle {name!r} has no installed-file metadata"
        )
    wanted = {PurePosixPath(*value.split("."), f) for f in MANIFEST_FILENAMES}
    matches = [Path(str(dist.locate_file(f))) for f in files if PurePosixPath(str(f)) in wanted]
    if not matches:
        for root in _editable_roots(dist):
            matches += [p for f in wanted if (p := root.joinpath(*f.parts)).is_file()]
            if matches:
                break
    if len(matches) != 1:
        raise BundleError(
            f"installed Bundle {name!r} must contain exactly one supported manifest file "
            f"beneath its registered module directory: {sorted(str(m) for m in matches)}"
        )
    return matches[0]


def discover_installed(
    bundle_ids: Iterable[str] | None = None,
    *,
    entry_points: Callable[..., Iterable[Any]] = importlib.metadata.entry_points,
) -> list[InstalledBundle]:
    """The installed bundles (all, or those named), from metadata only.

    Raises:
        BundleError: for a registration or manifest the host refuses, or a bundle id
            registered by several distributions.
    """
    wanted = None if bundle_ids is None else list(bundle_ids)
    found: dict[str, list[Any]] = {}
    for ep in entry_points(group=BUNDLES_GROUP):
        if wanted is None or ep.name in wanted:
            found.setdefault(ep.name, []).append(ep)
    out: list[InstalledBundle] = []
    for name in wanted if wanted is not None else sorted(found):
        eps = found.get(name, [])
        if not eps:
            continue
        dists = sorted({ep.dist.metadata["Name"] for ep in eps if ep.dist is not None})
        if len(eps) > 1:
            raise BundleError(
                f"installed Bundle {name!r} is registered by multiple distributions: {dists}"
            )
        ep = eps[0]
        if ep.dist is None:
            raise BundleError(f"installed Bundle {name!r} has no distribution metadata")
        path = _manifest_path(name, ep.value, ep.dist)
        try:
            if path.is_symlink() or not path.is_file():
                raise BundleError("extension bundle manifest must be a regular file")
            doc = json.loads(path.read_text(encoding="utf-8"))
            check_manifest(doc)
        except (OSError, ValueError) as exc:
            raise BundleError(
                f"installed Bundle {name!r} from distribution {dists} has an invalid "
                f"manifest: {exc}"
            ) from None
        if doc["bundle_id"] != name:
            raise BundleError(
                f"installed Bundle registration {name!r} does not match manifest bundle_id "
                f"{doc['bundle_id']!r}"
            )
        meta = ep.dist.metadata
        out.append(InstalledBundle(name, meta["Name"], meta["Version"], path, doc))
    return out


def resolve_startup(
    bundle_ids: Sequence[str],
    *,
    allowed_permissions: Iterable[str] = (),
    host_api_version: str = HOST_API_VERSION,
    entry_points: Callable[..., Iterable[Any]] = importlib.metadata.entry_points,
) -> tuple[ResolvedComponent, ...]:
    """The admitted components of the bundles ``--extension`` selects, in that order.

    Raises:
        BundleError: for an unknown or refused bundle, a host API outside its range, an
            isolation other than ``trusted_in_process``, or a permission not allowed.
    """
    if len(set(bundle_ids)) != len(bundle_ids) or not all(bundle_ids):
        raise BundleError("--extension values must be non-empty and unique")
    installed = {b.bundle_id: b for b in discover_installed(bundle_ids, entry_points=entry_points)}
    missing = [b for b in bundle_ids if b not in installed]
    if missing:
        raise BundleError(f"enabled bundle ids have no configured manifest: {missing}")
    allowed = set(allowed_permissions)
    out: list[ResolvedComponent] = []
    for bundle_id in bundle_ids:
        doc = installed[bundle_id].manifest
        if not check_api_range(doc["host_api_range"], host_api_version):
            raise BundleError(
                f"bundle {bundle_id!r} requires host API {doc['host_api_range']!r}, but this "
                f"host provides {host_api_version!r}"
            )
        for comp in check_manifest(doc):
            if comp.isolation != "trusted_in_process":
                raise BundleError(
                    f"component {comp.qualified_id} requests unsupported isolation "
                    f"{comp.isolation!r}"
                )
            denied = sorted(set(comp.permissions) - allowed)
            if denied:
                raise BundleError(
                    f"component {comp.qualified_id} requests permissions denied by host "
                    f"policy: {denied}"
                )
            out.append(comp)
    return tuple(out)
