"""Tests of ``ecpa.cli``: the commands, their files and shared stores, and docs/cli.md's
examples."""
