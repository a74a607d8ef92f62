"""Runtime evidence (RUNTIME.md), in four sub-rooms by role, each importing only those
before it: :mod:`~ecpa.runtime.model` (documents and names), :mod:`~ecpa.runtime.judge`
(the pure judgement of ``runtime_effective``), :mod:`~ecpa.runtime.stores` (stores shared
across hosts) and :mod:`~ecpa.runtime.host` (the local edge: files, ``ecpa status``,
``ecpa ship``).

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors`, :mod:`ecpa._files`; never observer,
launcher, corpus or cli.
"""
