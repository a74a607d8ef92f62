"""``ecpa run``, the manager's launch (RUNTIME.md "Actors", "Launch binding", "Launch
directory", "Slots", "Process keys"): the plan (:mod:`~ecpa.launcher.plan`), the launch
directory and its steps (:mod:`~ecpa.launcher.run`), supervision of the process tree
(:mod:`~ecpa.launcher.supervise`), the enrollment socket (:mod:`~ecpa.launcher.enroll`) and
the manager key that certifies each key enrolled (:mod:`~ecpa.launcher.manager`).

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.hsm` (a manager key in a
token), :mod:`ecpa.errors`, :mod:`ecpa._files`; never observer, corpus or cli.
"""
