"""The DLA simulator and driver: test-data tooling beside the plugin, never imported by it.

- :mod:`dla_plugin.sim.simulate`: the value simulator's runs (LIFO, DLA, DLA + reserve);
- :mod:`dla_plugin.sim.report`: ``python -m dla_plugin.sim``, the tables over seeds, run by
  :mod:`dla_plugin.sim.runs` in worker processes;
- :mod:`dla_plugin.sim.workload`, :mod:`dla_plugin.sim.burstgpt`, :mod:`dla_plugin.sim.trace`:
  synthetic traces, the BurstGPT loader and the trace-replay loader;
  :mod:`dla_plugin.sim.predict`: the prediction models;
- :mod:`dla_plugin.sim.engine`: the block-pool engine, timed by a step model of
  :mod:`dla_plugin.sim.steptime` (profiled: :mod:`dla_plugin.sim.vidur_a100_llama2_7b`);
- :mod:`dla_plugin.sim.drive`: a scheduler process with the plugin inside
  (``python -m dla_plugin.drive``).

May import: the plugin (``dla_plugin`` and its modules) and the standard library; ``ecpa``
only through the plugin's own lazy lookup of the process observer.
"""
