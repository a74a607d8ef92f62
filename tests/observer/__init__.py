"""Tests of ``ecpa.observer``: the in-process observer and the keys it holds."""
