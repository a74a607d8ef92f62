"""Tests of ``ecpa.verify_jobs``: ``ecpa verify --jobs N``."""
