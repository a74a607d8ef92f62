"""``python -m dla_plugin.drive``: the documented command of the driver, whose code lives in
:mod:`dla_plugin.sim.drive` (a scheduler process with the DLA plugin inside)."""

from dla_plugin.sim.drive import main

if __name__ == "__main__":
    raise SystemExit(main())
