"""Pipeline texts this process has seen, by their sha256: a session id carries only the hash, so
any worker can serve it once it has the text. A worker that lacks it answers 409
`{"need_source": sha256}`, and the client posts the text to `POST /pipelines/sources` (or creates
the session again). Bounded in entries and bytes; the least recently used go first."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

MAX_SOURCES = 256
MAX_BYTES = 8 * 1024 * 1024

_sources: OrderedDict[str, str] = OrderedDict()
_size = 0


class NeedSource(Exception):
    """A session id names a pipeline text this process does not have."""

    def __init__(self, sha256: str):
        super().__init__(sha256)
        self.sha256 = sha256


def sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def remember(source: str) -> str:
    """Keep `source`; its sha256."""
    global _size
    digest = sha256(source)
    if digest in _sources:
        _sources.move_to_end(digest)
        return digest
    _sources[digest] = source
    _size += len(source)
    while len(_sources) > MAX_SOURCES or _size > MAX_BYTES:
        _, old = _sources.popitem(last=False)
        _size -= len(old)
    return digest


def recall(digest: str) -> str:
    """The text of `digest`, or `NeedSource`."""
    source = _sources.get(digest)
    if source is None:
        raise NeedSource(digest)
    _sources.move_to_end(digest)
    return source
