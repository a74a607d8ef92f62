"""The DLA simulator and driver: test-data tooling beside the plugin, never imported by it.

- :mod:`dla_plugin.sim.simulate`: the value simulator's runs (LIFO, DLA, DLA + reserve);
- :mod:`dla_plugin.sim.report`: ``python -m dla_plugin.sim``, the table over seeds;
- :mod:`dla_plugin.sim.workload`, :mod:`dla_plugin.sim.burstgpt`: synthetic traces,
  prediction models and the BurstGPT loader;
- :mod:`dla_plugin.sim.engine`: the block-pool engine;
- :mod:`dla_plugin.sim.drive`: a scheduler process with the plugin inside
  (``python -m dla_plugin.drive``).

May import: the plugin (``dla_plugin`` and its modules) and the standard library; ``ecpa``
only through the plugin's own lazy lookup of the process observer.
"""
