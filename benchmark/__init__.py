"""Metrics, the method registry and the flowbench command."""
