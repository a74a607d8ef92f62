"""DLA packaging (DLA.md "Identity"): entry points, the Bundle manifest v1 and its schema, and
imports without side effects."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from dla_plugin.selector import BYPASS_KEY, DlaVictimSelector

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "schemas" / "bundle-manifest-v1.schema.json"
BUNDLE_GROUP = "vllm_hust.extension_bundles"
SELECTOR_GROUP = "vllm.victim_selector"
BUNDLE_ID = "org.vllm-hust.dla"


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


def test_bundle_entry_point_names_a_package_with_exactly_one_manifest() -> None:
    ep = _one(BUNDLE_GROUP, BUNDLE_ID)
    assert ep.value == "dla_plugin.manifests"
    assert [f.name for f in _manifest_files()] == ["vllm-hust-bundle-v1.json"]
    source_dir = ROOT / "dla_plugin" / "manifests"
    assert [p.name for p in source_dir.glob("*.json")] == ["vllm-hust-bundle-v1.json"]


# -- the manifest and its schema ---------------------------------------------------------------


def test_manifest_validates_against_the_schema() -> None:
    validator = _validator()
    manifest = _manifest()
    assert list(validator.iter_errors(manifest)) == []


def test_manifest_says_what_dla_md_says() -> None:
    manifest = _manifest()
    assert manifest["manifest_version"] == 1
    assert manifest["bundle_id"] == BUNDLE_ID
    (component,) = manifest["components"]
    assert component["id"] == f"{BUNDLE_ID}/victim-selector"
    assert component["kind"] == "victim-selector"
    assert component["contract"] == "vllm.scheduler.policy.v1"
    assert (component["plane"], component["isolation"]) == ("scheduler", "trusted_in_process")
    assert component["permissions"] == []
    assert component["bypass"] == {BYPASS_KEY: True}


def test_manifest_agrees_with_what_is_installed() -> None:
    # What the schema cannot say: ids under the bundle id, unique, and entry points real.
    manifest = _manifest()
    ids = [c["id"] for c in manifest["components"]]
    assert len(set(ids)) == len(ids)
    for component in manifest["components"]:
        assert component["id"].startswith(manifest["bundle_id"] + "/")
        declared = component["entry_point"]
        ep = _one(declared["group"], declared["name"])
        assert ep.value == declared["value"]
        assert ep.dist is not None
        assert ep.dist.name == manifest["distribution"]
        # The declared bypass really makes the component abstain.
        selector = ep.load()(component["bypass"], observer=None)
        assert selector.disabled


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.pop(key)


def _component(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["components"][0].update(changes)


BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "an extra member": lambda doc: doc.update(extra=1),
    "no bundle_id": _drop("bundle_id"),
    "no manifest_version": _drop("manifest_version"),
    "no components": _drop("components"),
    "no description": _drop("description"),
    "manifest_version 2": lambda doc: doc.update(manifest_version=2),
    "manifest_version true": lambda doc: doc.update(manifest_version=True),
    "bundle_id of one label": lambda doc: doc.update(bundle_id="dla"),
    "bundle_id upper case": lambda doc: doc.update(bundle_id="Org.vllm-hust.dla"),
    "bundle_id trailing newline": lambda doc: doc.update(bundle_id=BUNDLE_ID + "\n"),
    "distribution with a space": lambda doc: doc.update(distribution="ec pa"),
    "empty components": lambda doc: doc.update(components=[]),
    "a component's extra member": _component(extra=True),
    "a component without bypass": lambda doc: doc["components"][0].pop("bypass"),
    "a component id without a name": _component(id=BUNDLE_ID + "/"),
    "a component id without the bundle": _component(id="victim-selector"),
    "an unknown kind": _component(kind="scorer"),
    "a contract without a version": _component(contract="vllm.scheduler.policy"),
    "an unknown plane": _component(plane="worker"),
    "an unknown isolation": _component(isolation="subprocess"),
    "permissions not a list": _component(permissions="none"),
    "duplicate permissions": _component(permissions=["net", "net"]),
    "an entry point without a colon": _component(
        entry_point={"group": SELECTOR_GROUP, "name": "dla", "value": "dla_plugin.selector"}
    ),
    "an entry point with an extra member": _component(
        entry_point={
            "group": SELECTOR_GROUP,
            "name": "dla",
            "value": "dla_plugin.selector:DlaVictimSelector",
            "extras": [],
        }
    ),
    "a bypass set to false": _component(bypass={BYPASS_KEY: False}),
    "a bypass with another key": _component(bypass={BYPASS_KEY: True, "x": 1}),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_schema_refuses_a_broken_manifest(name: str) -> None:
    doc = copy.deepcopy(_manifest())
    BROKEN[name](doc)
    assert not _validator().is_valid(doc)


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
    assert len(objects) >= 4  # manifest, component, entry_point, bypass
    for node in objects:
        assert node["additionalProperties"] is False
        assert set(node["required"]) == set(node["properties"])
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
import dla_plugin, dla_plugin.selector, dla_plugin.admission, dla_plugin.legacy
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
    for name in ("dla_plugin.selector", "dla_plugin.admission", "dla_plugin.legacy"):
        assert name in result["modules"]


@pytest.mark.parametrize("launch", [False, True], ids=["no-launch-env", "launch-env"])
def test_the_policy_imports_without_ecpa(tmp_path: Path, launch: bool) -> None:
    # The engine loads the entry point in its scheduler process: ecpa (pydantic, cryptography)
    # is imported on the first call, and only when an observer is wanted.
    assert _run(_IMPORT_MINE, tmp_path, launch) == {"threads": 1, "ecpa": False}
