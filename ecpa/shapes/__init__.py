"""Shapes: frozen records with their wire names and checks (:mod:`.shape`), the checks
themselves (:mod:`.rules`), and the same constraints as pydantic types for the edges that
keep pydantic (:mod:`.pydantic_types`: the corpus formats).

May import: :mod:`ecpa.errors`, :mod:`ecpa.profile.json` and itself; never the rest of the
profile or any later room.
"""
