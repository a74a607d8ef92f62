"""``ecpa run``, the manager's launch (RUNTIME.md "Actors", "Launch binding", "Launch
directory"): the plan (:mod:`~ecpa.launcher.plan`), the launch directory and its steps
(:mod:`~ecpa.launcher.run`), signals and supervision (:mod:`~ecpa.launcher.signals`).

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.errors`,
:mod:`ecpa._files`; never observer, corpus or cli.
"""
