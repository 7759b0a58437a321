"""Every test run keeps its generated session key out of the user's data directory."""

import os
import tempfile

os.environ.setdefault("MBI_DATA_DIR", tempfile.mkdtemp(prefix="mbi-test-data-"))
