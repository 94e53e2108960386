"""Geo and Geo+ dataset generator (see geogen.schema for the data contract)."""
