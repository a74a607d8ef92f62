"""Runtime evidence (RUNTIME.md): evidence records and logs, replay fences, process identity
and liveness, the launch model, and the derivation of ``runtime_effective``
(:func:`ecpa.runtime.derive.derive` is pure; ``status_from_*`` are its I/O edge).

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors`, :mod:`ecpa._files`; never observer,
launcher, corpus or cli.
"""
