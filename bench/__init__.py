"""Benchmarks: each prints medians and ratios against a baseline measured in the same run."""
