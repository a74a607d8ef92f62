"""What a judging process remembers between refreshes (ecpa.runtime.judge.memo): a launch's
keys and its parsed ``trust.json``, by their inputs' content. Whatever changes, the answer
is the one judged afresh from the new inputs, never the one remembered; errors are never
remembered; each memory is bounded."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.launchdir import Written, manager_entry, write_launch
from ecpa.errors import EcpaError, ErrorCode
from ecpa.profile.keys import SigningKey
from ecpa.profile.trust import TrustStore
from ecpa.runtime.judge import certified, history
from ecpa.runtime.judge.certified import LaunchKeys, launch_keys, launch_trust_store
from ecpa.runtime.judge.memo import Memo, forget
from ecpa.runtime.model.enrollment import ENROLLMENTS_FILE
from ecpa.runtime.model.evidence import Evidence, parse_record, record_line
from ecpa.runtime.model.launch import ExpectedLaunch, launch_from_bytes
from ecpa.runtime.stores import remote
from tests.support import codes

NOW = 1_800_000_000
OPERATOR = TrustStore.from_dict({"schema": "ecpa-trust-store/0.1", "keys": [manager_entry()]})


@pytest.fixture
def w(tmp_path: Path) -> Written:
    return write_launch(tmp_path, slots=2, records=3, now=NOW)


def _inputs(w: Written) -> dict[str, Any]:
    launch_doc = (w.directory / "launch.json").read_bytes()
    return {
        "launch_trust": launch_trust_store((w.directory / "trust.json").read_bytes(), "t"),
        "expected": launch_from_bytes(launch_doc, "launch.json"),
        "launch_doc": launch_doc,
        "certificates": (w.directory / ENROLLMENTS_FILE).read_bytes(),
        "operator": OPERATOR,
        "operator_where": "test",
    }


def _afresh(inputs: dict[str, Any]) -> LaunchKeys:
    """The same judgement with nothing remembered."""
    forget()
    return launch_keys(**inputs)


def _same(a: LaunchKeys, b: LaunchKeys) -> bool:
    return (
        certified.store_content(a.store) == certified.store_content(b.store)
        and a.reasons == b.reasons
        and dict(a.identities) == dict(b.identities)
    )


def test_the_same_inputs_are_judged_once(w: Written) -> None:
    inputs = _inputs(w)
    first = launch_keys(**inputs)
    assert codes(first.reasons) == ["certified"]
    again = launch_keys(**{**inputs, "launch_doc": bytes(inputs["launch_doc"])})
    assert again is first
    assert certified._JUDGED.hits == 1


def _changed(w: Written, inputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each input replaced by another that judges otherwise."""
    data: bytes = inputs["certificates"]
    flipped = data.replace(b'"', b"'", 1)
    other_key = SigningKey.from_seed(b"o" * 32)
    other_operator = TrustStore.from_dict(
        {
            "schema": "ecpa-trust-store/0.1",
            "keys": [{**manager_entry(), "public_key_b64": other_key.public_key.to_b64()}],
        }
    )
    trust_doc = json.loads((w.directory / "trust.json").read_bytes())
    trust_doc["keys"][0]["enabled"] = False
    launch_doc = json.loads(inputs["launch_doc"])
    launch_doc["started_at"] += 1
    return {
        "a certificate byte": {**inputs, "certificates": flipped},
        "no certificates": {**inputs, "certificates": None},
        "unreadable certificates": {
            **inputs,
            "certificates": EcpaError(ErrorCode.INVALID_INPUT, "unreadable, as a test says"),
        },
        "the operator's store": {**inputs, "operator": other_operator},
        "no operator's store": {**inputs, "operator": None},
        "where no operator's store was found": {
            **inputs,
            "operator": None,
            "operator_where": "elsewhere",
        },
        "trust.json": {**inputs, "launch_trust": TrustStore.from_dict(trust_doc)},
        "launch.json's bytes": {**inputs, "launch_doc": json.dumps(launch_doc).encode()},
        "the expected launch": {
            **inputs,
            "expected": replace(inputs["expected"], challenge="another-challenge"),
        },
    }


def test_any_input_changed_is_judged_afresh(w: Written) -> None:
    """A memory keyed on fewer inputs than the judgement reads would answer with the old
    ``certified``: each change below judges otherwise, and the answer is the fresh one."""
    inputs = _inputs(w)
    before = launch_keys(**inputs)
    changes = _changed(w, inputs)
    nowhere = launch_keys(**changes["no operator's store"])
    for what, other in changes.items():
        launch_keys(**inputs)  # the old answer remembered, right before
        launch_keys(**changes["no operator's store"])
        found = launch_keys(**other)
        assert not _same(found, before), what
        if what == "where no operator's store was found":
            assert not _same(found, nowhere), what
        assert _same(found, _afresh(other)), what


def test_a_certificate_forged_after_a_good_judgement_is_refused(w: Written) -> None:
    """The judgement remembered from the good certificates does not cover forged ones."""
    inputs = _inputs(w)
    assert codes(launch_keys(**inputs).reasons) == ["certified"]
    seal, line, *rest = inputs["certificates"].splitlines(keepends=True)
    evidence = parse_record(line.rstrip(b"\n"))
    jws = evidence.detached_jws
    flipped = jws[:-2] + ("A" if jws[-2] != "A" else "B") + jws[-1]
    forged = b"".join(
        [seal, record_line(Evidence(evidence.payload, flipped, evidence.host_evidence)), *rest]
    )
    found = launch_keys(**{**inputs, "certificates": forged})
    assert "enrollment_refused" in codes(found.reasons)
    assert "ATTESTATION_INVALID_SIGNATURE" in found.reasons[0].text


def test_the_identities_remembered_cannot_be_changed(w: Written) -> None:
    judged = launch_keys(**_inputs(w))
    with pytest.raises(TypeError):
        judged.identities["k"] = judged.identities[next(iter(judged.identities))]  # type: ignore[index]


def test_a_trust_store_is_parsed_once_per_bytes(w: Written) -> None:
    data = (w.directory / "trust.json").read_bytes()
    first = launch_trust_store(data, "t")
    assert launch_trust_store(bytes(data), "t") is first
    other = launch_trust_store(data + b"\n", "t")
    assert other is not first
    assert certified.store_content(other) == certified.store_content(first)


def test_a_bad_trust_store_is_refused_each_time(w: Written) -> None:
    for data in (b"{", b'{"schema": "ecpa-trust-store/0.1", "keys": 3}'):
        for _ in range(2):
            with pytest.raises(EcpaError) as caught:
                launch_trust_store(data, "trust.json of a test")
            assert caught.value.code is ErrorCode.TRUST_STORE_CONFIG
    assert len(certified._PARSED) == 0


def test_a_memory_forgets_its_oldest_answers_until_a_new_one_fits() -> None:
    memo: Memo[str, int] = Memo("a test's", 4)
    memo.put("a", 1)
    memo.put("b", 2, weight=2)
    memo.put("a", 3)  # "a" is now the newest
    assert memo.weight == 3
    memo.put("c", 4, weight=2)  # "b", the oldest, goes
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (3, None, 4)
    assert (len(memo), memo.weight) == (2, 3)
    memo.put("d", 5, weight=5)  # heavier than the whole memory: not kept, nothing lost
    assert (memo.get("d"), len(memo), memo.weight) == (None, 2, 3)
    memo.put("e", 6, weight=0)  # weighs 1 at least
    assert memo.weight == 4
    forget()
    assert (len(memo), memo.weight) == (0, 0)
    with pytest.raises(ValueError, match="at least 1"):
        Memo("none", 0)


def test_a_launchs_keys_weigh_as_many_as_its_trust_json_lists(w: Written) -> None:
    inputs = _inputs(w)
    launch_keys(**inputs)
    assert certified._JUDGED.weight == len(inputs["launch_trust"]) == 2
    assert certified._PARSED.weight == 2


def test_a_stores_content_changes_with_each_field_a_judgement_reads(w: Written) -> None:
    """The key names a store by what its entries say: issuer, kid, key, subjects, enabled and
    window. A field left out would let a store that judges otherwise find the old answer."""
    doc = json.loads((w.directory / "trust.json").read_bytes())
    other_key = SigningKey.from_seed(b"k" * 32).public_key.to_b64()
    changes = {
        "issuer": "urn:ecpa:issuer:another",
        "kid": "another-kid",
        "public_key_b64": other_key,
        "subjects": ["host-runtime", "another-subject"],
        "enabled": False,
        "not_before": doc["keys"][0]["not_before"] + 1,
        "not_after": doc["keys"][0]["not_after"] - 1,
    }
    before = certified.store_content(TrustStore.from_dict(doc))
    inputs = _inputs(w)
    launch_keys(**inputs)
    for field, value in changes.items():
        changed = json.loads(json.dumps(doc))
        changed["keys"][0][field] = value
        store = TrustStore.from_dict(changed)
        assert certified.store_content(store) != before, field
        for role in ("launch_trust", "operator"):
            other = {**inputs, role: store}
            assert _same(launch_keys(**other), _afresh(other)), (field, role)
            launch_keys(**inputs)


def test_a_trust_basis_is_computed_once_per_store(
    w: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest a checkpoint records of the keys it was walked under: for the store a
    launch's keys judged (the same object while remembered), computed once, and the same
    for a store of the same content; another content, another digest."""
    store = launch_keys(**_inputs(w)).store
    first = history.trust_basis(store)  # (remembered from here on)
    real = TrustStore.to_dict
    calls: list[TrustStore] = []

    def counted(self: TrustStore) -> dict[str, Any]:
        calls.append(self)
        return real(self)

    monkeypatch.setattr(TrustStore, "to_dict", counted)
    assert history.trust_basis(store) == first
    assert calls == []
    twin = TrustStore.from_dict(real(store))
    assert history.trust_basis(twin) == first
    assert calls == [twin]
    doc = real(store)
    doc["keys"][0]["enabled"] = not doc["keys"][0]["enabled"]
    assert history.trust_basis(TrustStore.from_dict(doc)) != first
    forget()
    assert history.trust_basis(store) == first
    assert calls[-1] is store


def test_a_stored_launch_file_is_parsed_once_per_bytes(
    w: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch judged from the store again and again parses its ``launch.json`` once while
    remembered: the same bytes give the very launch parsed before, other bytes their own,
    and bad bytes are refused each time (never remembered)."""
    data = (w.directory / "launch.json").read_bytes()
    first = remote._expected(data, "launch x")
    parsed: list[bytes] = []
    real = remote.launch_from_bytes

    def counted(blob: bytes, what: str) -> ExpectedLaunch:
        parsed.append(blob)
        return real(blob, what)

    monkeypatch.setattr(remote, "launch_from_bytes", counted)
    assert remote._expected(bytes(data), "launch x") is first
    assert parsed == []
    other = remote._expected(data + b"\n", "launch x")
    assert other is not first
    assert other == first
    assert len(parsed) == 1
    for _ in range(2):
        with pytest.raises(EcpaError) as caught:
            remote._expected(b"{", "launch x")
        assert caught.value.code is ErrorCode.INVALID_INPUT
    assert len(parsed) == 3
    forget()
    assert remote._expected(data, "launch x") is not first
