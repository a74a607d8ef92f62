"""Tests of ``ecpa.profile``: the checks, signing, strict JSON, JCS, keys and trust stores
(PROFILE.md, docs/profile.md)."""
