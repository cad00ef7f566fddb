"""Helpers for tests and benchmarks: synthetic runs written exactly as the shim writes them."""
