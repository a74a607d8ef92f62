"""Tests of ``dla_plugin`` and its simulator ``dla_plugin.sim`` (DLA.md, docs/dla.md)."""
