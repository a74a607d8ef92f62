"""The conformance corpus: the runner behind ``ecpa corpus check`` (:mod:`~ecpa.corpus.runner`,
with the vector file models in :mod:`~ecpa.corpus.formats`) and, apart from it, the generator
of the published and extended cases (:mod:`ecpa.corpus.generator`), which the runner imports
only when asked to write the corpus.

May import: :mod:`ecpa.profile`, :mod:`ecpa.runtime`, :mod:`ecpa.errors`,
:mod:`ecpa._files`; never observer, launcher or cli.
"""
