"""``ecpa run --manager-key pkcs11:...``: the manager key in a token certifies each process
key; with the token's key in the operator's trust store the launch is effective, and
without it every status says why not."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ecpa.runtime import CERTIFY_SUBJECT, MANAGER_ISSUER, manager_kid
from tests._launch_helpers import DRIVE, ECPA, Launches, launches, status, wait_until
from tests.hsm.conftest import Token

pytestmark = pytest.mark.e2e  # real processes: ecpa run and the DLA driver

__all__ = ["launches"]  # the fixture, used by name


def test_a_manager_key_in_a_token_certifies_the_launch(
    token: Token, launches: Launches, tmp_path: Path
) -> None:
    public = token.public["manager"]
    operator = tmp_path / "operator.json"
    entry = {
        "issuer": MANAGER_ISSUER,
        "kid": manager_kid(public),
        "public_key_b64": public.to_b64(),
        "subjects": [CERTIFY_SUBJECT],
        "enabled": True,
        "not_before": 0,
        "not_after": 2**53 - 1,
    }
    operator.write_text(json.dumps({"schema": "ecpa-trust-store/0.1", "keys": [entry]}))
    run, directory = launches.start(*DRIVE, extra=("--manager-key", token.uri()))
    found: list[dict[str, Any]] = []

    def effective() -> bool:
        found[:] = [status(directory, "--trust", str(operator))[1]]
        return bool(found[0]["runtime_effective"])

    assert wait_until(effective, timeout=60), found
    launches.logs(directory)
    assert found[0]["reasons"][-1]["code"] == "certified"
    # The session's operator store (the default) does not list the token's key: the same
    # launch is false there, and ecpa run said so when it started.
    default = subprocess.run(
        [str(ECPA), "status", "--launch", str(directory), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert default.returncode == 1
    assert json.loads(default.stdout)["reasons"][0]["code"] == "enrollment_refused"
    run.send_signal(signal.SIGTERM)
    assert wait_until(lambda: run.poll() is not None, timeout=60)
    assert run.stderr is not None
    said = run.stderr.read()
    assert "does not trust the manager key" in said
    assert token.uri() in said  # the command to add it names the key as given
