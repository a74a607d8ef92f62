"""The local edge: a launch directory's files as ``ecpa status`` reads them, the trust store
file and its safe update, ``ecpa status --launch`` and ``ecpa ship``.

May import: the other sub-rooms of the runtime (:mod:`ecpa.runtime.stores`,
:mod:`ecpa.runtime.judge`, :mod:`ecpa.runtime.model`), :mod:`ecpa.profile`,
:mod:`ecpa.errors`, :mod:`ecpa._files`.
"""
