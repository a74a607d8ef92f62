"""Deterministic generators of the corpus files: the published ECPA 0.1 cases byte for byte
(:mod:`~ecpa.corpus.generator.upstream`), our extended cases (``extended`` over ``kit``,
``envelope``, ``payload``, ``late``) and the trust-store cases (``trust_cases``).

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors` and itself.
"""
