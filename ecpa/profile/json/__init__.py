"""JSON as PROFILE.md reads and writes it: the strict parser (:mod:`.strict_json`), its
event scanner and reference parser (``_events``, ``_ref``), and RFC 8785 canonical form
(:mod:`.jcs`).

May import: :mod:`ecpa.errors` and itself.
"""
