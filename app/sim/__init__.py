"""The deterministic simulation engine (standard library only)."""

from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("trace_schema.json")
