"""`slow` tests (bigger configurations) run only with MBI_SLOW_TESTS=1, to keep CI fast."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("MBI_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow; set MBI_SLOW_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
