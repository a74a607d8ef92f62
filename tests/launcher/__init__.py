"""Tests of ``ecpa.launcher``: ``ecpa run``, plans, supervision, enrollment, real launches end
to end."""
