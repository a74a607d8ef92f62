"""DLA: decode-length-aware preemption and admission for the vLLM(-HUST) scheduler (DLA.md).

- :class:`DlaVictimSelector`: the host contract's ``select_victim`` policy (never raises);
- :func:`admit`, :func:`blocks_needed`: the admission reserve;
- :func:`pick_victim`: the pre-contract API, delegating to the same rule;
- :class:`Candidate`, :class:`PreemptionContext`, :class:`WaitingRequest`: the host-contract
  shapes, for tests and the simulator (the policy reads attributes, so any object will do).

Importing this package, or any module in it, has no side effects and does not import ``ecpa``.
The Bundle manifest v1 lives in :mod:`dla_plugin.manifests`.
"""

from dla_plugin.admission import admit, blocks_needed
from dla_plugin.contract import Candidate, PreemptionContext, WaitingRequest
from dla_plugin.legacy import pick_victim
from dla_plugin.selector import DlaVictimSelector

__all__ = [
    "Candidate",
    "DlaVictimSelector",
    "PreemptionContext",
    "WaitingRequest",
    "admit",
    "blocks_needed",
    "pick_victim",
]
