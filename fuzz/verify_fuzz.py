"""Coverage-guided fuzzing of ``ecpa.verify`` with atheris (see fuzz/README.md).

Run: ``python fuzz/verify_fuzz.py -max_total_time=60`` (libFuzzer flags pass through).

One input is split into a payload and a detached JWS:

* bytes 0-1, big-endian: bit 15 set means the JWS is given to ``verify`` as ``str`` (the
  bytes decoded as UTF-8, undecodable bytes kept as lone surrogates), clear means as
  ``bytes``; bits 0-14 are the payload length, cut to what is there;
* then the payload, then the JWS.

The trust store is the published corpus's (TEST keys 1 and 2), ``now`` its time. A crash is
any exception other than ``ecpa.EcpaError`` out of ``verify`` (PROFILE §4, STYLE rule 1), or
an accepted input that breaks the round trip: the statement re-canonicalizes to exactly the
payload bytes, and re-signing it with the TEST key gives the same JWS.

The file also imports without atheris: ``tests/profile/test_fuzz.py`` runs :func:`TestOneInput`
over ``fuzz/seeds/`` in CI, and ``--write-seeds`` rewrites that folder from the corpus.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

try:
    import atheris
except ImportError:  # the smoke test imports this file without atheris
    atheris = None

# Instrument ecpa (and the JCS library under it) only when fuzzing: imported by a test,
# ecpa is already loaded and the harness runs uninstrumented.
_FUZZING = atheris is not None and __name__ == "__main__"
_INSTRUMENT = (
    atheris.instrument_imports(include=["ecpa", "rfc8785"])
    if _FUZZING
    else contextlib.nullcontext()
)
with _INSTRUMENT:
    import ecpa
    from ecpa.corpus.generator.upstream import NOW, SEEDS, upstream_document

SEED_DIR = Path(__file__).resolve().parent / "seeds"
TEXT_FLAG = 0x8000
MAX_SPLIT = 0x7FFF

_DOC = upstream_document()
TRUST = ecpa.TrustStore.from_dict({"schema": ecpa.TRUST_STORE_SCHEMA, "keys": _DOC["keys"]})
KEYS = {f"test-key-{n}": ecpa.SigningKey.from_seed(seed) for n, seed in SEEDS.items()}


def encode_input(payload: bytes, jws: bytes | str, *, as_text: bool = False) -> bytes:
    """The harness input for ``payload`` and ``jws`` (a str JWS is written as UTF-8)."""
    if len(payload) > MAX_SPLIT:
        raise ValueError(f"payload of {len(payload)} bytes: at most {MAX_SPLIT} fit the split")
    raw = jws.encode("utf-8", "surrogateescape") if isinstance(jws, str) else jws
    head = len(payload) | (TEXT_FLAG if as_text else 0)
    return head.to_bytes(2, "big") + payload + raw


def split_input(data: bytes) -> tuple[bytes, bytes | str]:
    """(payload, JWS) of a harness input; every byte string is a valid input."""
    head = int.from_bytes(data[:2], "big") if len(data) >= 2 else 0
    rest = data[2:] if len(data) >= 2 else data
    cut = min(head & MAX_SPLIT, len(rest))
    payload, jws = rest[:cut], rest[cut:]
    if head & TEXT_FLAG:
        return payload, jws.decode("utf-8", "surrogateescape")
    return payload, jws


def check(data: bytes) -> str:
    """Verify one input; return "OK" or the error code.

    Raises:
        AssertionError: an accepted input that does not round-trip.
        Exception: whatever foreign exception ``verify`` lets through (a crash).
    """
    payload, jws = split_input(data)
    try:
        verified = ecpa.verify(payload, jws, TRUST, now=NOW)
    except ecpa.EcpaError as exc:
        return exc.code.value
    text = jws if isinstance(jws, str) else jws.decode("latin-1")
    assert verified.payload == payload
    assert ecpa.canonicalize(verified.statement.to_dict()) == payload, "not canonical"
    again = ecpa.sign(verified.statement, KEYS[verified.header["kid"]])
    assert (again.payload, again.detached_jws) == (payload, text), "re-signing differs"
    return "OK"


def TestOneInput(data: bytes) -> None:  # libFuzzer's name for the target
    """The fuzz target: only ``EcpaError`` is an expected outcome."""
    check(data)


# Seed cases from the published corpus: (case id, JWS given as text).
SEED_CASES = (
    ("positive-ascii", False),
    ("positive-unicode-decomposed", True),
    ("positive-key-rotation", False),
    ("negative-signature-tamper", False),
    ("negative-wrong-alg", True),
    ("negative-noncanonical", False),
    ("negative-lone-surrogate", False),
    ("negative-base64-padding", False),
)


def seed_inputs() -> dict[str, bytes]:
    """File name -> bytes of the seed corpus; a name starts with the expected outcome."""
    from ecpa.profile.b64 import b64u_decode

    cases = {case["id"]: case for case in _DOC["cases"]}
    seeds = {}
    for ident, as_text in SEED_CASES:
        case = cases[ident]
        payload = b64u_decode(case["payload_b64"], what="payload")
        name = f"{case['expected']}.{ident.removeprefix('negative-')}"
        seeds[name] = encode_input(payload, case["detached_jws"], as_text=as_text)
    return seeds


def write_seeds(directory: Path = SEED_DIR) -> None:
    """Write :func:`seed_inputs` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in seed_inputs().items():
        (directory / name).write_bytes(data)


def main(argv: list[str]) -> None:
    if argv[1:] == ["--write-seeds"]:
        write_seeds()
        return
    if atheris is None:
        sys.exit("atheris is not installed: pip install -e '.[fuzz]'")
    if not any(not arg.startswith("-") for arg in argv[1:]):
        # No corpus folder given: new inputs go to a scratch folder, the seeds are read too.
        scratch = tempfile.mkdtemp(prefix="ecpa-fuzz-")
        print(f"verify_fuzz: working corpus {scratch}, seeds {SEED_DIR}", file=sys.stderr)
        argv = [*argv, scratch, str(SEED_DIR)]
    atheris.Setup(argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
