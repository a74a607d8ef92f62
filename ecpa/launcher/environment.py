"""The launched command's environment: what ``ecpa run`` adds (RUNTIME.md's binding, the
vLLM-HUST host's evidence variables), what it refuses to find already set, and what of its
own it never passes on (passphrases, PINs, the manager key's name)."""

from __future__ import annotations

from collections.abc import Mapping

from ecpa.errors import invalid_input
from ecpa.runtime import BINDING_ENV_NAMES, HOST_ENV_PREFIX, SINK_TARGET

__all__ = ["BINDING_NAMES", "PRIVATE_NAMES", "check_environment", "host_evidence_env"]

#: What the manager sets for the command (RUNTIME.md's 0.2 binding and the observer's
#: cadence), and every name it refuses to find already set (the 0.1 names included).
BINDING_NAMES = (*BINDING_ENV_NAMES, "ECPA_EMIT_INTERVAL_S")
#: Variables of ecpa's own that the launched command never gets: a key's passphrase, a
#: token's PIN, where the manager key is (docs/keys.md).
PRIVATE_NAMES = frozenset({"ECPA_KEY_PASSWORD", "ECPA_PKCS11_PIN", "ECPA_MANAGER_KEY"})


def check_environment(environ: Mapping[str, str]) -> None:
    """Refuse a caller's environment that already holds a binding variable, or any of the
    host's evidence variables (``VLLM_ECPA_*``): the binding is the manager's alone, never
    passed through and never silently replaced.

    Raises:
        EcpaError: ``ECPA_INVALID_INPUT`` naming the variables found.
    """
    found = [name for name in BINDING_NAMES if name in environ]
    found += sorted(name for name in environ if name.startswith(HOST_ENV_PREFIX))
    if found:
        raise invalid_input(
            "expected no launch binding in the caller's environment (ecpa run sets it), "
            f"found {found}"
        )


def host_evidence_env(plan_id: str, launch_id: str) -> dict[str, str]:
    """What the vLLM-HUST host reads to deliver its evidence to ecpa (docs/host-evidence.md):
    ecpa's sink, strict mode (a sink that cannot record makes the host stop delivering,
    never deliver elsewhere), and the plan and launch its events are bound to."""
    return {
        f"{HOST_ENV_PREFIX}EVIDENCE_SINK": SINK_TARGET,
        f"{HOST_ENV_PREFIX}EVIDENCE_STRICT": "1",
        f"{HOST_ENV_PREFIX}PLAN_ID": plan_id,
        f"{HOST_ENV_PREFIX}LAUNCH_ID": launch_id,
    }
