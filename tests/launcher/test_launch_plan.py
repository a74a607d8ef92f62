"""Plans (schema ecpa-plan/0.1), launch.json written from them, and the default plan found
through installed metadata (``ecpa/launch.py``, ``ecpa/_launcher_plan.py``)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ecpa
from ecpa.launcher.run import BUNDLE_GROUP, BUNDLE_NAME, DEFAULT_PLUGIN_ID, default_plan, load_plan
from ecpa.runtime.model.launch import DEFAULT_SLOTS, Slot, launch_from_file
from ecpa.runtime.model.plan import (
    PLAN_SCHEMA,
    PLAN_SCHEMA_01,
    Plan,
    launch_document,
    plan_from_bytes,
    plan_from_dict,
)
from ecpa.runtime.model.process import ProcessIdentity

SUPERVISOR = ProcessIdentity("host-a", 4242, 1000, "boot-1")

INVALID = ecpa.ErrorCode.INVALID_INPUT
DIGEST = "sha256:" + "ab" * 32
ISSUER = "urn:ecpa:issuer:test-host"


def plan_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "plan_id": "plan-7",
        "plugin_id": "plugin:dla",
        "artifact_digest": DIGEST,
    }
    for name, value in changes.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    return doc


def parse(doc: dict[str, Any]) -> Plan:
    return plan_from_dict(doc, "plan", default_issuer=ISSUER)


def test_defaults() -> None:
    plan = parse(plan_doc())
    assert plan == Plan(
        plan_id="plan-7",
        plugin_id="plugin:dla",
        artifact_digest=DIGEST,
        issuer=ISSUER,
        process_epoch=1,
        emit_interval_s=1,
        heartbeat_window_s=3,
        max_duration_s=86400,
    )
    assert parse(plan.to_dict()) == plan  # to_dict reads back as the same plan


@pytest.mark.parametrize(("interval", "window"), [(1, 3), (2, 6), (10, 30), (100, 300)])
def test_heartbeat_default_is_three_intervals(interval: int, window: int) -> None:
    plan = parse(plan_doc(emit_interval_s=interval))
    assert plan.heartbeat_window_s == window
    assert plan.emit_interval_s == interval


def test_every_member_given() -> None:
    doc = plan_doc(
        issuer="urn:ecpa:issuer:other",
        process_epoch=9,
        emit_interval_s=2,
        heartbeat_window_s=2,
        max_duration_s=60,
    )
    plan = parse(doc)
    assert (plan.issuer, plan.process_epoch, plan.emit_interval_s) == (
        "urn:ecpa:issuer:other",
        9,
        2,
    )
    assert (plan.heartbeat_window_s, plan.max_duration_s) == (2, 60)


def test_plan_id_derived_from_the_resolved_plan() -> None:
    plan = parse(plan_doc(plan_id=None))
    resolved = {k: v for k, v in plan.to_dict().items() if k != "plan_id"}
    digest = hashlib.sha256(ecpa.canonicalize(resolved)).hexdigest()
    assert plan.plan_id == f"plan:sha256:{digest}"
    # Writing a default out changes nothing; changing a value changes the id.
    assert parse(plan_doc(plan_id=None, emit_interval_s=1)).plan_id == plan.plan_id
    assert parse(plan_doc(plan_id=None, emit_interval_s=2)).plan_id != plan.plan_id
    other_host = plan_from_dict(plan_doc(plan_id=None), "plan", default_issuer="urn:x")
    assert other_host.plan_id != plan.plan_id


@pytest.mark.parametrize(
    ("changes", "member"),
    [
        ({"extra": 1}, "extra"),
        ({"schema": "ecpa-plan/0.4"}, "schema"),
        ({"host_evidence": "on"}, "host_evidence"),
        ({"host_evidence": True}, "host_evidence"),
        ({"host_policy": ""}, "host_policy"),
        ({"host_policy": 7}, "host_policy"),
        ({"schema": None}, "schema"),
        ({"plugin_id": None}, "plugin_id"),
        ({"plugin_id": ""}, "plugin_id"),
        ({"plugin_id": "a\nb"}, "plugin_id"),
        ({"plan_id": 7}, "plan_id"),
        ({"artifact_digest": None}, "artifact_digest"),
        ({"artifact_digest": "sha256:" + "AB" * 32}, "artifact_digest"),
        ({"artifact_digest": "sha256:" + "ab" * 31}, "artifact_digest"),
        ({"artifact_digest": "sha512:" + "ab" * 32}, "artifact_digest"),
        ({"issuer": ""}, "issuer"),
        ({"process_epoch": -1}, "process_epoch"),
        ({"process_epoch": 1.5}, "process_epoch"),
        ({"process_epoch": True}, "process_epoch"),
        ({"emit_interval_s": 0}, "emit_interval_s"),
        ({"emit_interval_s": -1}, "emit_interval_s"),
        ({"emit_interval_s": "1"}, "emit_interval_s"),
        ({"emit_interval_s": True}, "emit_interval_s"),
        ({"emit_interval_s": 86401}, "emit_interval_s"),
        # RUNTIME.md: no statement lives longer than 300 s, so an interval over a
        # third of that would let status flip between records; it is refused.
        ({"emit_interval_s": 101}, "emit_interval_s"),
        ({"emit_interval_s": 301}, "emit_interval_s"),
        ({"slots": []}, "slots"),
        ({"slots": [{"role": "scheduler", "ordinal": 0}] * 2}, "slots"),
        ({"slots": [{"role": "Sched", "ordinal": 0}]}, "slot role"),
        ({"slots": [{"role": "scheduler", "ordinal": -1}]}, "slot ordinal"),
        ({"slots": [{"role": "scheduler"}]}, "slot"),
        (
            {"emit_interval_s": 0.5},
            "emit_interval_s",
        ),  # whole seconds: strict JSON has no fractions
        ({"emit_interval_s": 1.0}, "emit_interval_s"),
        ({"heartbeat_window_s": 0}, "heartbeat_window_s"),
        ({"heartbeat_window_s": 2.5}, "heartbeat_window_s"),
        ({"heartbeat_window_s": 1, "emit_interval_s": 2}, "heartbeat_window_s"),
        ({"max_duration_s": 0}, "max_duration_s"),
    ],
)
def test_bad_plans_name_the_member(changes: dict[str, Any], member: str) -> None:
    with pytest.raises(ecpa.EcpaError) as exc_info:
        parse(plan_doc(**changes))
    assert exc_info.value.code is INVALID
    assert member in exc_info.value.detail


def test_plan_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_doc(emit_interval_s=2, issuer=ISSUER)))
    plan = load_plan(path)
    assert plan.emit_interval_s == 2
    assert plan.issuer == ISSUER
    with pytest.raises(ecpa.EcpaError) as exc_info:
        load_plan(tmp_path / "missing.json")
    assert exc_info.value.code is INVALID
    text = json.dumps(plan_doc(emit_interval_s=4)).encode()
    assert plan_from_bytes(text, "plan", default_issuer=ISSUER).emit_interval_s == 4
    for bad in (b'{"a": 0.5}', b"\xef\xbb\xbf{}", b'{"a": NaN}', b"[1]"):  # strict JSON
        with pytest.raises(ecpa.EcpaError) as exc_info:
            plan_from_bytes(bad, "plan", default_issuer=ISSUER)
        assert exc_info.value.code is INVALID
    with pytest.raises(ecpa.EcpaError) as exc_info:  # a duplicate member
        plan_from_bytes(text[:-1] + b', "plugin_id": "other"}', "plan", default_issuer=ISSUER)
    assert exc_info.value.code is INVALID


def test_launch_json_reads_back(tmp_path: Path) -> None:
    plan = parse(plan_doc(emit_interval_s=2))
    doc = launch_document(
        plan, launch_id="launch-1", challenge="c" * 43, started_at=1800000000, supervisor=SUPERVISOR
    )
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(doc))
    expected = launch_from_file(path)
    assert (expected.plan_id, expected.launch_id, expected.challenge) == (
        "plan-7",
        "launch-1",
        "c" * 43,
    )
    assert expected.heartbeat_window_s == 6  # 3 intervals of 2 s
    assert (expected.version, expected.supervisor, expected.slots) == (
        "0.2",
        SUPERVISOR,
        DEFAULT_SLOTS,
    )
    # A fraction is refused (strict JSON), here in a member launch_from_file checks.
    path.write_text(json.dumps({**doc, "process_epoch": 1.5}))
    with pytest.raises(ecpa.EcpaError) as exc_info:
        launch_from_file(path)
    assert exc_info.value.code is INVALID


# --- the default plan: the installed bundle, found through metadata -----------------------


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A bundle package ``fake_bundle_pkg`` on sys.path, named by a monkeypatched entry
    point; yields its directory (tests put manifests in it)."""
    package = tmp_path / "fake_bundle_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch, "fake_bundle_pkg")
    yield package
    sys.modules.pop("fake_bundle_pkg", None)


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *values: str) -> None:
    eps = [importlib.metadata.EntryPoint(BUNDLE_NAME, v, BUNDLE_GROUP) for v in values]
    eps.append(importlib.metadata.EntryPoint("other.bundle", "elsewhere", BUNDLE_GROUP))

    def entry_points(**params: Any) -> importlib.metadata.EntryPoints:
        assert params == {"group": BUNDLE_GROUP}
        return importlib.metadata.EntryPoints(eps)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_default_plan_from_the_bundle_manifest(bundle: Path) -> None:
    manifest = b'{"bundle": "org.vllm-hust.dla", "version": 1}\n'
    (bundle / "vllm-hust-extension-v1.json").write_bytes(manifest)
    (bundle / "README.txt").write_text("not a manifest")
    (bundle / "vllm-hust-bundle-v1.json").write_text("{}")  # not a name the host reads
    plan = default_plan(issuer=ISSUER)
    assert plan.plugin_id == DEFAULT_PLUGIN_ID
    assert plan.artifact_digest == "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert plan.issuer == ISSUER
    assert (plan.process_epoch, plan.emit_interval_s, plan.heartbeat_window_s) == (1, 1.0, 3)
    resolved = {k: v for k, v in plan.to_dict().items() if k != "plan_id"}
    digest = hashlib.sha256(ecpa.canonicalize(resolved)).hexdigest()
    assert plan.plan_id == f"plan:sha256:{digest}"
    assert default_plan(issuer=ISSUER) == plan  # deterministic


def test_default_plan_reads_the_older_manifest_name(bundle: Path) -> None:
    (bundle / "extension-bundle-v1.json").write_bytes(b"{}")
    assert (
        default_plan(issuer=ISSUER).artifact_digest == "sha256:" + hashlib.sha256(b"{}").hexdigest()
    )


@pytest.mark.parametrize("count", [0, 2])
def test_default_plan_needs_exactly_one_manifest(bundle: Path, count: int) -> None:
    names = ["vllm-hust-extension-v1.json", "extension-bundle-v1.json"][:count]
    for name in names:
        (bundle / name).write_text("{}")
    (bundle / "other.json").write_text("{}")
    with pytest.raises(ecpa.EcpaError) as exc_info:
        default_plan(issuer=ISSUER)
    assert exc_info.value.code is INVALID
    assert "expected exactly one manifest (vllm-hust-extension-v1.json or" in exc_info.value.detail


@pytest.mark.parametrize(
    ("values", "found"),
    [
        ((), "expected --plan FILE or an installed org.vllm-hust.dla bundle, found none"),
        (("pkg_a", "pkg_b"), "found 2"),
        (("pkg:attr",), "to name a package"),
        (("no_such_bundle_package_xyz",), "ModuleNotFoundError"),
    ],
)
def test_default_plan_without_a_usable_bundle(
    monkeypatch: pytest.MonkeyPatch, values: tuple[str, ...], found: str
) -> None:
    fake_entry_points(monkeypatch, *values)
    with pytest.raises(ecpa.EcpaError) as exc_info:
        default_plan(issuer=ISSUER)
    assert exc_info.value.code is INVALID
    assert found in exc_info.value.detail


def _installed_manifest() -> Path | None:
    """The installed bundle's manifest, found independently of ``ecpa``, or None."""
    eps = importlib.metadata.entry_points(group=BUNDLE_GROUP)
    values = [ep.value for ep in eps if ep.name == BUNDLE_NAME]
    if len(values) != 1:
        return None
    root = importlib.resources.files(values[0])
    files = [p for p in root.iterdir() if p.name == "vllm-hust-extension-v1.json"]
    return Path(str(files[0])) if len(files) == 1 else None


def test_default_plan_from_the_installed_bundle() -> None:
    manifest = _installed_manifest()
    if manifest is None:
        pytest.skip(f"no {BUNDLE_NAME} bundle installed (entry point group {BUNDLE_GROUP})")
    plan = default_plan()
    assert plan.plugin_id == DEFAULT_PLUGIN_ID
    assert plan.artifact_digest == "sha256:" + hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert plan.plan_id.startswith("plan:sha256:")


def test_slots_in_a_plan_and_its_launch(tmp_path: Path) -> None:
    slots = [{"role": "scheduler", "ordinal": 0}, {"role": "scheduler", "ordinal": 1}]
    plan = parse(plan_doc(slots=slots))
    assert plan.slots == (Slot("scheduler", 0), Slot("scheduler", 1))
    assert parse(plan.to_dict()) == plan
    doc = launch_document(
        plan, launch_id="l-1", challenge="c" * 43, started_at=1, supervisor=SUPERVISOR
    )
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(doc))
    assert launch_from_file(path).slots == plan.slots


def test_a_01_plan_is_one_slot_and_keeps_its_plan_id() -> None:
    old = parse(plan_doc(schema=PLAN_SCHEMA_01, plan_id=None))
    assert old.slots == DEFAULT_SLOTS
    # the plan_id a 0.1 plan always had: the digest of its 0.1 form
    assert (
        old.plan_id
        == "plan:sha256:"
        + __import__("hashlib")
        .sha256(
            ecpa.canonicalize(
                {
                    "schema": PLAN_SCHEMA_01,
                    "plugin_id": "plugin:dla",
                    "artifact_digest": DIGEST,
                    "issuer": ISSUER,
                    "process_epoch": 1,
                    "emit_interval_s": 1,
                    "heartbeat_window_s": 3,
                    "max_duration_s": 86400,
                }
            )
        )
        .hexdigest()
    )
    with pytest.raises(ecpa.EcpaError) as exc_info:
        parse(plan_doc(schema=PLAN_SCHEMA_01, slots=[{"role": "scheduler", "ordinal": 0}]))
    assert exc_info.value.code is INVALID


@pytest.mark.parametrize("launch_id", ["a/b", "..", "x\x00y", "tab\there", "\u202eevil"])
def test_a_launch_id_that_cannot_name_a_file_is_refused(tmp_path: Path, launch_id: str) -> None:
    """A NUL in launch.json's launch_id was a ValueError (exit 3)."""
    plan = parse(plan_doc())
    doc = launch_document(
        plan, launch_id=launch_id, challenge="c" * 43, started_at=1, supervisor=SUPERVISOR
    )
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ecpa.EcpaError) as exc_info:
        launch_from_file(path)
    assert exc_info.value.code is INVALID


# --- host evidence (plans 0.3, docs/host-evidence.md) --------------------------------------

POLICY = "dla_plugin.selector.DlaVictimSelector"


def test_a_03_plan_says_whether_the_hosts_witness_is_required(tmp_path: Path) -> None:
    plan = parse(plan_doc(host_evidence="required", host_policy=POLICY))
    assert (plan.host_evidence, plan.host_policy) == ("required", POLICY)
    assert parse(plan.to_dict()) == plan
    assert parse(plan_doc()).host_evidence == "off"  # the default
    doc = launch_document(
        plan, launch_id="l-1", challenge="c" * 43, started_at=1, supervisor=SUPERVISOR
    )
    assert (doc["host_evidence"], doc["host_policy"]) == ("required", POLICY)
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(doc))
    expected = launch_from_file(path)
    assert (expected.host_evidence, expected.host_policy) == ("required", POLICY)
    # a launch.json written before these members: host evidence off, any policy
    path.write_text(json.dumps({k: v for k, v in doc.items() if not k.startswith("host_")}))
    assert (launch_from_file(path).host_evidence, launch_from_file(path).host_policy) == (
        "off",
        None,
    )
    for bad in ({"host_evidence": "on"}, {"host_policy": ""}, {"host_policy": 3}):
        path.write_text(json.dumps({**doc, **bad}))
        with pytest.raises(ecpa.EcpaError) as exc_info:
            launch_from_file(path)
        assert exc_info.value.code is INVALID
        assert next(iter(bad)) in exc_info.value.detail


def test_a_02_plan_is_read_with_host_evidence_off_and_keeps_its_plan_id() -> None:
    doc = plan_doc(schema="ecpa-plan/0.2", plan_id=None)
    old = parse(doc)
    assert (old.host_evidence, old.host_policy) == ("off", None)
    content = {k: v for k, v in old.to_dict().items() if k not in ("plan_id", "host_evidence")}
    content = {
        **{k: v for k, v in content.items() if k != "host_policy"},
        "schema": "ecpa-plan/0.2",
    }
    assert old.plan_id == "plan:sha256:" + hashlib.sha256(ecpa.canonicalize(content)).hexdigest()
    with pytest.raises(ecpa.EcpaError) as exc_info:  # 0.2 has no such member
        parse(plan_doc(schema="ecpa-plan/0.2", host_evidence="required"))
    assert exc_info.value.code is INVALID
    assert "host_evidence" in exc_info.value.detail  # the member named


def test_host_evidence_required_of_the_bundle_takes_its_policy(bundle: Path) -> None:
    from ecpa.launcher.plan import with_host_evidence

    manifest = {
        "bundle_id": "org.vllm-hust.dla",
        "components": [{"component_id": "victim-selector", "implementation_ref": "pkg.mod:Policy"}],
    }
    (bundle / "vllm-hust-extension-v1.json").write_text(json.dumps(manifest))
    plan = default_plan(issuer=ISSUER)
    assert plan.host_policy == "pkg.mod.Policy"  # module:Class as the host names it
    required = with_host_evidence(replace_policy(plan), "required")
    assert (required.host_evidence, required.host_policy) == ("required", "pkg.mod.Policy")
    assert with_host_evidence(required, "off").host_evidence == "off"
    other = parse(plan_doc(plugin_id="someone.else/policy"))
    with pytest.raises(ecpa.EcpaError) as exc_info:
        with_host_evidence(other, "required")
    assert exc_info.value.code is INVALID
    assert "host_policy" in exc_info.value.detail  # what is missing, named
    with pytest.raises(ecpa.EcpaError) as exc_info:
        with_host_evidence(plan, "sometimes")
    assert exc_info.value.code is INVALID


def replace_policy(plan: Plan) -> Plan:
    return plan_from_dict({**plan.to_dict(), "host_policy": None}, "p", default_issuer=ISSUER)


def test_a_manifest_without_the_component_gives_no_policy(bundle: Path) -> None:
    from ecpa.launcher.plan import with_host_evidence

    (bundle / "vllm-hust-extension-v1.json").write_bytes(b"{}")
    plan = default_plan(issuer=ISSUER)
    assert plan.host_policy is None  # host evidence off: nothing to pin
    with pytest.raises(ecpa.EcpaError) as exc_info:
        with_host_evidence(plan, "required")
    assert exc_info.value.code is INVALID
    assert "implementation_ref" in exc_info.value.detail  # what is missing, named


def test_reading_a_plan_imports_no_pydantic() -> None:
    """The plan is a shape (docs/adr/0004): ``ecpa run`` reads it without pydantic."""
    import subprocess

    code = (
        "import sys\n"
        "from ecpa.launcher.plan import load_plan\n"
        "from ecpa.runtime import plan_from_dict\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("changes", "member"),
    [
        ({"plugin_id": "a\nb"}, "plugin_id"),
        ({"issuer": "x" * 1025}, "issuer"),
        ({"host_evidence": "on"}, "host_evidence"),
        ({"emit_interval_s": 101}, "emit_interval_s"),
        ({"slots": ({"role": "scheduler", "ordinal": 0},)}, "slots"),
        ({"plugin_id": None}, "plugin_id"),
    ],
)
def test_a_refusal_says_what_was_expected_and_found(changes: dict[str, Any], member: str) -> None:
    """Each refusal names the member, then what it expected and what it found (STYLE rule
    2), as pydantic's messages did before the plan became a shape."""
    doc = plan_doc()
    doc.update(changes)
    with pytest.raises(ecpa.EcpaError) as exc_info:
        parse(doc)
    assert exc_info.value.code is INVALID
    assert exc_info.value.detail.startswith(f"plan: member {member!r}: expected ")
    assert "; found " in exc_info.value.detail
