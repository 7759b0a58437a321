"""Traces converted to other tools' formats (pure functions from a trace document; no web code)."""
