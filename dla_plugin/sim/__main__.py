"""``python -m dla_plugin.sim``: the DLA value simulator's table (:mod:`dla_plugin.sim.report`)."""

from dla_plugin.sim.report import main

raise SystemExit(main())
