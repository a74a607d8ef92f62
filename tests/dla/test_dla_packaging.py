"""DLA packaging (DLA.md "Identity"): entry points, the extension bundle manifest v1 as the
vLLM-HUST host defines and discovers it, our schema of it, and imports without side
effects."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from importlib import metadata, resources
from importlib.metadata import EntryPoint, entry_points, version
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from dla_plugin.selector import DlaVictimSelector
from dla_plugin.sim.host.bundles import (
    BundleError,
    check_manifest,
    discover_installed,
    resolve_startup,
)
from dla_plugin.sim.host.victim_selector import load_implementation

pytestmark = pytest.mark.e2e  # real processes throughout

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "schemas" / "bundle-manifest-v1.schema.json"
BUNDLE_GROUP = "vllm.extension_bundles"
SELECTOR_GROUP = "vllm.victim_selector"
BUNDLE_ID = "org.vllm-hust.dla"
MANIFEST_NAME = "vllm-hust-extension-v1.json"


def _one(group: str, name: str) -> EntryPoint:
    found = [ep for ep in entry_points(group=group) if ep.name == name]
    assert len(found) == 1, f"{group}:{name} registered {len(found)} times"
    return found[0]


def _manifest_files() -> list[Any]:
    module = _one(BUNDLE_GROUP, BUNDLE_ID).load()
    assert isinstance(module, ModuleType)
    return [f for f in resources.files(module).iterdir() if f.name.endswith(".json")]


def _manifest() -> dict[str, Any]:
    (only,) = _manifest_files()
    doc = json.loads(only.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# -- entry points ------------------------------------------------------------------------------


def test_victim_selector_entry_point_loads_the_class() -> None:
    ep = _one(SELECTOR_GROUP, "dla")
    assert ep.value == "dla_plugin.selector:DlaVictimSelector"
    assert ep.load() is DlaVictimSelector
    assert ep.dist is not None
    assert ep.dist.name == "ecpa"


def test_bundle_is_registered_where_the_host_discovers_bundles() -> None:
    """The host reads group ``vllm.extension_bundles``; the name it once had here,
    ``vllm_hust.extension_bundles``, is read by nothing, so it is gone."""
    ep = _one(BUNDLE_GROUP, BUNDLE_ID)
    assert ep.value == "dla_plugin.manifests"
    assert [f.name for f in _manifest_files()] == [MANIFEST_NAME]
    source_dir = ROOT / "dla_plugin" / "manifests"
    assert [p.name for p in source_dir.glob("*.json")] == [MANIFEST_NAME]
    assert list(entry_points(group="vllm_hust.extension_bundles")) == []


def test_the_host_model_discovers_and_admits_the_installed_bundle() -> None:
    (bundle,) = discover_installed([BUNDLE_ID])
    assert (bundle.bundle_id, bundle.distribution) == (BUNDLE_ID, "ecpa")
    assert bundle.manifest_path.name == MANIFEST_NAME
    assert bundle.manifest == _manifest()
    (component,) = resolve_startup([BUNDLE_ID])
    assert component.qualified_id == f"{BUNDLE_ID}/victim-selector"
    assert load_implementation(component.implementation_ref) is DlaVictimSelector


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the tracked files (nothing written into the
    checkout) and unpacked as an installer would lay it out."""
    tmp = tmp_path_factory.mktemp("wheel")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False, timeout=60
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    source = tmp / "src"
    for name in tracked.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(tmp)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp.glob("ecpa-*.whl")
    site = tmp / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def test_the_wheel_ships_the_bundle_and_the_host_finds_it(unpacked_wheel: Path) -> None:
    """From a wheel, the host finds the manifest through the distribution's file list (no
    editable-install shortcut) and admits its component."""
    dists = list(metadata.distributions(path=[str(unpacked_wheel)]))
    assert [d.metadata["Name"] for d in dists] == ["ecpa"]

    def wheel_entry_points(*, group: str) -> list[EntryPoint]:
        return [ep for d in dists for ep in d.entry_points if ep.group == group]

    (bundle,) = discover_installed([BUNDLE_ID], entry_points=wheel_entry_points)
    assert bundle.manifest_path == unpacked_wheel / "dla_plugin" / "manifests" / MANIFEST_NAME
    assert (
        bundle.manifest_path.read_bytes()
        == (ROOT / "dla_plugin/manifests" / MANIFEST_NAME).read_bytes()
    )
    (component,) = resolve_startup([BUNDLE_ID], entry_points=wheel_entry_points)
    assert component.implementation_ref == "dla_plugin.selector:DlaVictimSelector"
    assert [ep.value for ep in wheel_entry_points(group=SELECTOR_GROUP)] == [
        "dla_plugin.selector:DlaVictimSelector"
    ]
    assert wheel_entry_points(group="vllm_hust.extension_bundles") == []


# -- the manifest and its schema ---------------------------------------------------------------


def test_manifest_validates_against_the_schema_and_the_hosts_rules() -> None:
    manifest = _manifest()
    assert list(_validator().iter_errors(manifest)) == []
    (component,) = check_manifest(manifest)
    assert component.component_id == "victim-selector"


def test_manifest_says_what_dla_md_says() -> None:
    manifest = _manifest()
    assert list(manifest) == [
        "schema_version",
        "bundle_id",
        "bundle_version",
        "host_api_range",
        "components",
    ]
    assert manifest["schema_version"] == "1.0"
    assert manifest["bundle_id"] == BUNDLE_ID
    assert manifest["bundle_version"] == version("ecpa")  # the wheel's own version
    assert manifest["host_api_range"] == ">=1.0,<2"
    (component,) = manifest["components"]
    assert component == {
        "component_id": "victim-selector",
        "contracts": ["vllm.scheduler.policy.v1"],
        "execution_planes": ["scheduler"],
        "isolation": "trusted_in_process",
        "implementation_ref": "dla_plugin.selector:DlaVictimSelector",
        "permissions": [],
    }


def test_the_old_manifest_breaks_the_hosts_rules() -> None:
    """DLA.md "Identity" (members "and no others"): the manifest once shipped had other
    members, and the host's rules refuse it."""
    old = {
        "manifest_version": 1,
        "bundle_id": BUNDLE_ID,
        "distribution": "ecpa",
        "description": "DLA",
        "components": [{"id": "x", "contract": "vllm.scheduler.policy.v1"}],
    }
    errors = list(_validator().iter_errors(old))
    assert len(errors) >= 5
    with pytest.raises(BundleError, match="unknown fields"):
        check_manifest(old)


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.pop(key)


def _component(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["components"][0].update(changes)


def _component_drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["components"][0].pop(key)


BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "an extra member": lambda doc: doc.update(description="DLA"),
    "no schema_version": _drop("schema_version"),
    "no bundle_id": _drop("bundle_id"),
    "no bundle_version": _drop("bundle_version"),
    "no host_api_range": _drop("host_api_range"),
    "no components": _drop("components"),
    "schema_version 1": lambda doc: doc.update(schema_version=1),
    "schema_version 2.0": lambda doc: doc.update(schema_version="2.0"),
    "bundle_id upper case": lambda doc: doc.update(bundle_id="Org.vllm-hust.dla"),
    "bundle_id with a slash": lambda doc: doc.update(bundle_id="org/dla"),
    "bundle_version not semver": lambda doc: doc.update(bundle_version="1.0"),
    "bundle_version with a v": lambda doc: doc.update(bundle_version="v1.0.0"),
    "host_api_range with a space": lambda doc: doc.update(host_api_range=">=1.0, <2"),
    "host_api_range without an operator": lambda doc: doc.update(host_api_range="1.0"),
    "host_api_range of four parts": lambda doc: doc.update(host_api_range=">=1.0.0.0"),
    "empty components": lambda doc: doc.update(components=[]),
    "components not a list": lambda doc: doc.update(components={}),
    "a component's extra member": _component(kind="victim-selector"),
    "a component without component_id": _component_drop("component_id"),
    "a component without contracts": _component_drop("contracts"),
    "a component without execution_planes": _component_drop("execution_planes"),
    "a component without isolation": _component_drop("isolation"),
    "a component without implementation_ref": _component_drop("implementation_ref"),
    "a component id with a slash": _component(component_id=f"{BUNDLE_ID}/victim-selector"),
    "a component id upper case": _component(component_id="Victim-selector"),
    "an unknown contract": _component(contracts=["vllm.scheduler.policy"]),
    "no contract": _component(contracts=[]),
    "a contract twice": _component(contracts=["vllm.scheduler.policy.v1"] * 2),
    "contracts a string": _component(contracts="vllm.scheduler.policy.v1"),
    "an unknown plane": _component(execution_planes=["gpu"]),
    "no plane": _component(execution_planes=[]),
    "an unknown isolation": _component(isolation="subprocess"),
    "an empty implementation_ref": _component(implementation_ref=""),
    "permissions not a list": _component(permissions="none"),
    "an unknown permission": _component(permissions=["net"]),
    "duplicate permissions": _component(permissions=["ipc", "ipc"]),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_schema_and_host_rules_refuse_a_broken_manifest(name: str) -> None:
    doc = copy.deepcopy(_manifest())
    BROKEN[name](doc)
    assert not _validator().is_valid(doc)
    with pytest.raises(BundleError):
        check_manifest(doc)


def test_host_rules_beyond_the_schema() -> None:
    doc = copy.deepcopy(_manifest())
    doc["components"].append(copy.deepcopy(doc["components"][0]))
    assert _validator().is_valid(doc)  # the schema cannot say it
    with pytest.raises(BundleError, match="component ids must be unique"):
        check_manifest(doc)
    doc = copy.deepcopy(_manifest())
    doc["components"][0].pop("permissions")  # optional: the default is none
    assert _validator().is_valid(doc)
    assert check_manifest(doc)[0].permissions == ()


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every sub-schema of ``node`` that describes an object with properties."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "properties" in node:
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


def test_schema_is_strict() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    objects = _objects(schema)
    assert len(objects) == 2  # manifest, component
    for node in objects:
        assert node["additionalProperties"] is False
        assert set(node["required"]) | {"permissions"} >= set(node["properties"])
        assert node.get("type") == "object"


# -- imports without side effects --------------------------------------------------------------

_IMPORT_ALL = """
import importlib, json, pkgutil, threading
import ecpa.observer
calls = []
ecpa.observer.process_observer = lambda: calls.append(1)
import dla_plugin
names = ["dla_plugin"] + [
    m.name for m in pkgutil.walk_packages(dla_plugin.__path__, "dla_plugin.")
    if not m.name.endswith(".__main__")  # a command (python -m), not a module to import
]
for name in names:
    importlib.import_module(name)
print(json.dumps({"threads": threading.active_count(), "calls": len(calls), "modules": names}))
"""

_IMPORT_MINE = """
import json, sys, threading
import dla_plugin, dla_plugin.selector, dla_plugin.admission, dla_plugin.rule
import dla_plugin.contract, dla_plugin.manifests
print(json.dumps({"threads": threading.active_count(), "ecpa": "ecpa" in sys.modules}))
"""


def _env(tmp_path: Path, launch: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECPA_")}
    if launch:
        evidence = tmp_path / "evidence"
        evidence.mkdir(mode=0o700)
        env.update(
            ECPA_PLAN_ID="plan-1",
            ECPA_LAUNCH_ID="launch-1",
            ECPA_CHALLENGE="c" * 32,
            ECPA_PLUGIN_ID=BUNDLE_ID,
            ECPA_ARTIFACT_DIGEST="sha256:" + "0" * 64,
            ECPA_ISSUER="urn:ecpa:issuer:test",
            ECPA_KID="key-1",
            ECPA_SIGNING_KEY_FILE=str(tmp_path / "signing-key.pem"),
            ECPA_EVIDENCE_DIR=str(evidence),
            ECPA_PROCESS_EPOCH="1",
        )
    return env


def _run(script: str, tmp_path: Path, launch: bool) -> dict[str, Any]:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=_env(tmp_path, launch),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert list(cwd.iterdir()) == []
    if launch:
        assert list((tmp_path / "evidence").iterdir()) == []
        assert not (tmp_path / "signing-key.pem").exists()
    result = json.loads(done.stdout)
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("launch", [False, True], ids=["no-launch-env", "launch-env"])
def test_importing_any_module_has_no_side_effects(tmp_path: Path, launch: bool) -> None:
    result = _run(_IMPORT_ALL, tmp_path, launch)
    assert result["threads"] == 1
    assert result["calls"] == 0  # process_observer is looked up on the first call only
    for name in ("dla_plugin.selector", "dla_plugin.rule", "dla_plugin.sim.host.victim_selector"):
        assert name in result["modules"]


@pytest.mark.parametrize("launch", [False, True], ids=["no-launch-env", "launch-env"])
def test_the_policy_imports_without_ecpa(tmp_path: Path, launch: bool) -> None:
    # The engine loads the entry point in its scheduler process: ecpa (pydantic, cryptography)
    # is imported on the first call, and only when an observer is wanted.
    assert _run(_IMPORT_MINE, tmp_path, launch) == {"threads": 1, "ecpa": False}
