"""Session ids: a session's value (run key and cursor), compact, signed and stamped.

A session is (scenario, params, bugs, schedule, picks, step); its id is that value as JSON, signed
with the deployment's secret key (`app.core.security.session_key`), so any worker rebuilds the
session from the id alone and no one else can mint one. Every decoded field is validated by
`TokenFields`, built from the same `RunSpec` fields as the request that creates a session, so a
forged shape is a 404, never a 500; expiry is judged by the server's clock (an id stamped in the
future is refused, so no id lives forever).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from app.api.errors import fail
from app.api.runs import Params, params_dict
from app.api.runstore import SESSION_STEP_LIMIT, RunKey
from app.api.sources import recall, remember
from app.core.config import settings
from app.core.security import session_key
from app.sim.schedule import SCHEDULES, Schedule

MAX_TOKEN_CHARS = 16_000
MAX_PICKS = 4_000
"""Steps at which a caller may name the mover: they travel inside the session id."""
MAX_SEED = 2**63 - 1
CLOCK_SKEW_S = 60
"""How far in the future an id's stamp may be (hosts' clocks differ a little)."""
ISSUED_KEPT = 8192

ScenarioId = Annotated[StrictStr, Field(min_length=1, max_length=80)]
BugName = Annotated[StrictStr, Field(min_length=1, max_length=60)]
Seed = Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]
Step = Annotated[StrictInt, Field(ge=0, le=SESSION_STEP_LIMIT)]


class RunSpec(BaseModel):
    """What a session request and a session id both say about the run."""

    model_config = ConfigDict(extra="forbid")
    scenario: ScenarioId | None = None
    source_sha256: Annotated[StrictStr, Field(pattern="^[0-9a-f]{64}$")] | None = None
    """A pipeline text's sha256, in place of `scenario` (the text itself: app.api.sources)."""
    params: Params | Annotated[dict[Annotated[StrictStr, Field(max_length=80)], StrictInt],
                               Field(max_length=64)] = Params()
    bugs: Annotated[list[BugName], Field(max_length=16)] = []
    seed: Seed | None = None


class TokenFields(RunSpec):
    """A decoded session id: `RunSpec` plus the schedule kind, picks, cursor and stamp."""

    v: Annotated[StrictInt, Field(ge=1, le=1)]
    kind: Annotated[StrictStr, Field(max_length=20)]
    picks: Annotated[list[tuple[Annotated[StrictInt, Field(ge=1, le=SESSION_STEP_LIMIT)],
                                Annotated[StrictInt, Field(ge=0, le=2**32 - 1)]]],
                     Field(max_length=MAX_PICKS)] = []
    step: Step
    issued: Annotated[StrictInt, Field(ge=0, le=2**40)]
    c: Annotated[StrictStr, Field(pattern="^[0-9a-f]{16}$")] | None = None
    """The session's client stamp: made by `POST /sessions`, kept by every step."""


@cache
def _key() -> bytes:
    return session_key(settings)


def new_client() -> str:
    return secrets.token_hex(8)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    """The bytes of a canonical unpadded base64url text; any other spelling of them (padding,
    stray characters, other values of a last character's unused bits) is a `ValueError`, so one
    id has one spelling."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical spelling")
    return data


def _mac(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=_key(), digest_size=16).digest()


def unknown_session(why: str = "the id is damaged or was not issued by this server"):
    return fail(404, "path", "session_id", f"unknown session: {why}; create a new session")


@dataclass(frozen=True, slots=True)
class SessionToken:
    """A session id: a run key and a cursor. `encode` stamps the time, for idle expiry."""

    key: RunKey
    step: int
    client: str = ""
    """A stamp every id of one session (one student) carries: its share of the server
    (app.core.clients). Ids from before it have none, and count as their address."""

    def encode(self, now: float | None = None) -> str:
        key = self.key
        issued = int(time.time() if now is None else now)
        where = ({"source_sha256": remember(key.source)} if key.source is not None
                 else {"scenario": key.scenario})
        fields = {"v": 1, **where, "params": dict(key.params),
                  "bugs": list(key.bugs), "kind": key.schedule.kind, "seed": key.schedule.seed,
                  "picks": key.picks, "step": self.step, "issued": issued}
        if self.client:
            fields["c"] = self.client
        payload = json.dumps(fields, separators=(",", ":")).encode()
        if len(payload) > 600:  # only ids with many picks: compressing costs more than the bytes
            payload = b"z" + zlib.compress(payload, 6)
        text = f"{_b64(payload)}.{_b64(_mac(payload))}"
        _remember(text, self, issued)
        return text

    @classmethod
    def decode(cls, text: str) -> SessionToken:
        """The token `encode` wrote; a damaged or forged id is a 404, an idle one a 410."""
        if not isinstance(text, str) or len(text) > MAX_TOKEN_CHARS:
            raise unknown_session()
        now = time.time()
        known = _issued.get(text)
        if known is not None:  # an id this process issued: no need to parse and check it again
            token, issued = known
            _check_age(now, issued)
            return token
        if text.count(".") != 1:
            raise unknown_session()
        body, mac = text.split(".")
        try:
            payload = _unb64(body)
            if not hmac.compare_digest(_unb64(mac), _mac(payload)):
                raise unknown_session()
            if payload[:1] == b"z":
                inflate = zlib.decompressobj()
                payload = inflate.decompress(payload[1:], 1 << 20)
                if inflate.unconsumed_tail:
                    raise unknown_session("the id is too large")
            fields = TokenFields.model_validate_json(payload)
        except (ValueError, binascii.Error, zlib.error, ValidationError):
            raise unknown_session() from None
        _check_age(now, fields.issued)
        if fields.kind not in SCHEDULES:
            raise unknown_session()
        steps = [s for s, _ in fields.picks]
        if steps != sorted(set(steps)):
            raise unknown_session()
        schedule = (Schedule("random", seed=fields.seed or 0) if fields.kind == "random"
                    else Schedule(fields.kind, moves=()) if fields.kind == "manual"
                    else Schedule(fields.kind))
        if (fields.scenario is None) == (fields.source_sha256 is None):
            raise unknown_session()
        source = None if fields.source_sha256 is None else recall(fields.source_sha256)
        key = RunKey(fields.scenario or "", tuple(sorted(
            params_dict(fields.params).items())),
            tuple(fields.bugs), schedule, tuple(fields.picks), source=source)
        token = cls(key, fields.step, fields.c or "")
        _remember(text, token, fields.issued)  # checked: its next decode (the route's) is a look-up
        return token


def _check_age(now: float, issued: int) -> None:
    if issued > now + CLOCK_SKEW_S:
        raise unknown_session("the id is stamped in the future")
    if now - issued > settings.session_idle_s:
        raise fail(410, "path", "session_id",
                   f"session expired: idle for more than {settings.session_idle_s} s; "
                   "create a new one (a permalink recreates it)")


_issued: OrderedDict[str, tuple[SessionToken, int]] = OrderedDict()
"""Ids this process issued or checked lately, already parsed: the next request usually brings
one back (and the rate limiter reads a request's id before its route does)."""


def _remember(text: str, token: SessionToken, issued: int) -> None:
    _issued[text] = (token, issued)
    if len(_issued) > ISSUED_KEPT:
        _issued.popitem(last=False)
