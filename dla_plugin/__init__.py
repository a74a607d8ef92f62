"""DLA: decode-length-aware preemption and admission for the vLLM(-HUST) scheduler (DLA.md).

- :class:`DlaVictimSelector`: the policy on every way into the host (DLA.md "three ways in"):
  the typed preemption policy's ``select_victim`` and the ``VictimSelector`` API 1's
  ``pick_victim`` (legacy entry point ``dla`` and typed component), never raising;
- :func:`admit`, :func:`blocks_needed`: the admission reserve;
- :class:`Candidate`, :class:`PreemptionContext`, :class:`WaitingRequest`: the host-contract
  shapes, for tests and the simulator (the policy reads attributes, so any object will do).

Importing this package, or any module in it, has no side effects and does not import ``ecpa``.
The extension bundle manifest v1 lives in :mod:`dla_plugin.manifests`; models of the host's
three paths, for tests and the driver, in :mod:`dla_plugin.sim.host.preemption`,
:mod:`dla_plugin.sim.host.victim_selector` and :mod:`dla_plugin.sim.host.bundles`.
"""

from dla_plugin.admission import admit, blocks_needed
from dla_plugin.contract import Candidate, PreemptionContext, WaitingRequest
from dla_plugin.selector import DlaVictimSelector

__all__ = [
    "Candidate",
    "DlaVictimSelector",
    "PreemptionContext",
    "WaitingRequest",
    "admit",
    "blocks_needed",
]
