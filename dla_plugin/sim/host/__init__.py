"""Models of the vLLM-HUST host's three plugin paths, for the simulator and the tests: the
typed preemption controller (:mod:`.preemption`, after the host's ``preemption.py``), the
``VictimSelector`` scheduler path (:mod:`.victim_selector`) and extension bundles' manifest
rules, discovery and admission (:mod:`.bundles`). Written from the host's facts (names,
types, protocol checks, failure semantics); no host code. A vLLM user installs none of it.

May import: :mod:`dla_plugin`'s plugin modules and itself; never :mod:`ecpa` or the rest of
the simulator.
"""
