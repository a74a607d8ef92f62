"""A launch's lifecycle (:mod:`ecpa.launcher.lifecycle`): installed (the bundle's manifest
digest is the launch's artifact digest), configured (slots obligated), enabled (the launch's
binding read and well formed), runtime_effective (the verdict); each says what it checked."""

from __future__ import annotations

import hashlib
import importlib.metadata
from typing import Any

import pytest

from ecpa.launcher.lifecycle import STAGES, lifecycle
from ecpa.launcher.plan import BUNDLE_GROUP, DEFAULT_PLUGIN_ID, bundle_manifest
from ecpa.runtime import RuntimeStatus, SlotStatus
from ecpa.runtime.judge.reasons import Reason, ReasonCode


def installed_digest() -> str:
    return "sha256:" + hashlib.sha256(bundle_manifest()[1]).hexdigest()


def slot(name: str, covered: bool) -> SlotStatus:
    return SlotStatus(name, covered, None, None, None, None, None, None, ())


def status(effective: bool, *slots: SlotStatus, accepted: int = 5) -> RuntimeStatus:
    reason = Reason(ReasonCode.COVERAGE_INCOMPLETE, "coverage: 0/1 slots")
    return RuntimeStatus(effective, (reason,), None, None, accepted, {}, 0, None, (), 0, slots)


def binding(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"plan_id": "plan-1", "plugin_id": DEFAULT_PLUGIN_ID}
    doc.update(changes)
    if "artifact_digest" not in doc:
        doc["artifact_digest"] = installed_digest()
    return doc


def test_a_launch_of_the_installed_bundle_is_installed_configured_enabled() -> None:
    stages = lifecycle(binding(), status(True, slot("scheduler.0", True)))
    assert list(stages) == list(STAGES)
    assert {name: stage.state for name, stage in stages.items()} == dict.fromkeys(STAGES, True)
    assert installed_digest() in stages["installed"].detail
    assert "scheduler.0" in stages["configured"].detail
    assert "plan plan-1" in stages["enabled"].detail
    assert "5 accepted" in stages["enabled"].detail
    assert stages["runtime_effective"].detail.startswith("coverage 1/1 slots")


def test_another_build_of_the_bundle_is_not_installed() -> None:
    stages = lifecycle(binding(artifact_digest="sha256:" + "7" * 64), status(False))
    assert stages["installed"].state is False
    assert "another build" in stages["installed"].detail
    assert stages["enabled"].state is True  # still bound to its plan


def test_a_launch_of_another_plugin_is_not_the_installed_bundle() -> None:
    stages = lifecycle(binding(plugin_id="org.example/other"), status(False, slot("x.0", False)))
    assert stages["installed"].state is False
    assert "'org.example/other' is not the" in stages["installed"].detail


def test_no_installed_bundle_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def none(**params: Any) -> importlib.metadata.EntryPoints:
        assert params == {"group": BUNDLE_GROUP}
        return importlib.metadata.EntryPoints([])

    monkeypatch.setattr(importlib.metadata, "entry_points", none)
    stages = lifecycle(binding(artifact_digest="sha256:" + "7" * 64), status(False))
    assert stages["installed"].state is False
    assert "not installed" in stages["installed"].detail


def test_no_obligated_slot_is_not_configured() -> None:
    stages = lifecycle(binding(), status(False))
    assert stages["configured"].state is False
    assert "no slot" in stages["configured"].detail


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        (None, "could not be read"),
        ({"plugin_id": DEFAULT_PLUGIN_ID}, "lacks plan_id, artifact_digest"),
        ({"plan_id": "p", "plugin_id": "q", "artifact_digest": 7}, "lacks artifact_digest"),
        ({"plan_id": "p", "plugin_id": "q", "artifact_digest": "md5:1"}, "not sha256:<64 hex>"),
    ],
)
def test_a_binding_not_read_or_malformed_is_not_enabled(doc: Any, said: str) -> None:
    stages = lifecycle(doc, status(False, slot("scheduler.0", False)))
    assert stages["enabled"].state is False
    assert said in stages["enabled"].detail
    assert stages["installed"].state is False
    assert stages["runtime_effective"].state is False
