"""Adapters that put each method behind the benchmark's protocol (benchmark.registry)."""
