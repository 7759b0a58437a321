"""What every request passes before a route sees it, and what every answer carries.

One plain ASGI middleware (`Guard`; the decorator kind would wrap every call in extra tasks):
- request bodies are bounded before they are parsed (413 past `settings.max_body_bytes`), a POST
  with a body must say `application/json`, and a body-less POST may not claim a form type (so
  another site cannot drive a session with a "simple" cross-site request, which skips CORS
  preflight); JSON is checked for nesting depth, keys per object and integer length, with a
  422 naming the field;
- every answer gets `X-Content-Type-Options: nosniff` and `Referrer-Policy`; pages get a CSP built
  from configuration only (never from the Host header), framable only under `/embed/`;
- WebSockets are accepted only on socket routes and from allowed origins, compared exactly (a
  browser page of another site could otherwise play sessions with the user's network position);
- an error in the app is still a JSON 500 with these headers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from pathlib import Path

from app.core.clients import TooMany, charge_request
from app.core.config import Settings, settings

MAX_DEPTH = 32
"""Deepest JSON nesting a body may have (the API's own bodies nest 3 deep)."""
MAX_KEYS = 256
"""Most keys one JSON object of a body may have (the API's own objects have at most 64)."""
MAX_INT_DIGITS = 20
"""Longest integer literal in a body (int64 has 19 digits)."""
JSON_TYPE = "application/json"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")


# ------------------------------------------------------------------------------ session key

class SessionKeyError(RuntimeError):
    """The session key cannot be had: the message says what to fix (the server does not start)."""


def derive_key(secret: str) -> bytes:
    """The MAC key of `MBI_SESSION_KEY`, whatever its length (BLAKE2b takes at most 64 bytes;
    `openssl rand -hex 64` makes 128)."""
    return hashlib.blake2b(secret.encode(), digest_size=32, person=b"mbi-session-key").digest()


def session_key(config: Settings = settings) -> bytes:
    """The key that signs session ids: derived from `MBI_SESSION_KEY`, else a random one created
    once under the data directory with O_EXCL, so worker processes starting together all read
    the same. `SessionKeyError` names the folder or file that stands in the way."""
    if config.session_key.strip():
        return derive_key(config.session_key)
    folder = Path(config.data_dir)
    path = folder / "session.key"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    except OSError as err:
        raise SessionKeyError(f"cannot create the session key {path}: {err.strerror}; make "
                        f"{folder} writable, set MBI_DATA_DIR to a writable folder, or set "
                        "MBI_SESSION_KEY") from None
    key = secrets.token_bytes(32)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.hex())
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        with contextlib.suppress(OSError):
            path.unlink()
        raise SessionKeyError(f"cannot write the session key {path}: {err.strerror}; free space "
                        f"in {folder}, or set MBI_SESSION_KEY") from None
    return key


def _read_key(path: Path) -> bytes:
    for _ in range(100):  # another worker may be writing it right now
        try:
            text = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as err:
            raise SessionKeyError(f"cannot read the session key {path}: "
                            f"{getattr(err, 'strerror', None) or err}") from None
        if len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text):
            return bytes.fromhex(text)
        time.sleep(0.01)
    raise SessionKeyError(f"{path} is not a session key (64 hex digits; it holds {len(text)} "
                    "characters); delete it (a new one is made, and earlier session ids stop "
                    "working) or set MBI_SESSION_KEY")


# ------------------------------------------------------------------------------------ CSP

def loopback_origins(port: int | None) -> tuple[str, ...]:
    """What a browser sends as Origin from a page of this server on loopback."""
    suffix = f":{port}" if port and port not in (80, 443) else ""
    return tuple(f"{scheme}://{host}{suffix}" for scheme in ("http", "https")
                 for host in ("127.0.0.1", "localhost", "[::1]"))


def allowed_origins(port: int | None, config: Settings = settings) -> tuple[str, ...]:
    return config.allowed_origins or loopback_origins(port)


def _socket_sources(port: int | None, config: Settings) -> str:
    """CSP host-sources cannot name an IPv6 literal (`[::1]`: browsers drop it with a console
    error); a page served from one still reaches its own socket through `'self'`."""
    origins = allowed_origins(port, config)
    return " ".join(o.replace("http", "ws", 1) for o in origins
                    if o.startswith("http") and "[" not in o)


def page_csp(path: str, port: int | None = None, config: Settings = settings) -> str:
    """The page's own scripts, styles and sockets only (no CDN, works offline)."""
    ancestors = config.frame_ancestors if path.startswith("/embed/") else "'none'"
    if path in ("/docs", "/redoc"):  # Swagger UI and ReDoc style by attribute, ReDoc uses workers
        return ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
                "font-src 'self'; base-uri 'self'; form-action 'none'; object-src 'none'; "
                f"frame-ancestors {ancestors}")
    return ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self' {_socket_sources(port, config)}; base-uri 'self'; "
            f"form-action 'self'; object-src 'none'; frame-ancestors {ancestors}")


SOCKET_ROUTES = (re.compile(r"^/api/v1/sessions/[^/]{1,16000}/ws$"),)
"""The WebSocket routes, each open to the allowed origins only (compared exactly)."""


def origin_allowed(origin: str, port: int | None, config: Settings = settings) -> bool:
    """A WebSocket's Origin: exactly one of the allowed origins (scheme, host and port; the
    host's case and a trailing slash aside). An embed page runs in its iframe with this server's
    own origin, so a frame ancestor never needs the socket."""
    origin = origin.lower().rstrip("/")
    return origin in (o.lower().rstrip("/") for o in allowed_origins(port, config))


# ---------------------------------------------------------------------- JSON input bounds

class BodyError(Exception):
    def __init__(self, loc: list, message: str, status: int = 422):
        self.loc, self.message, self.status = loc, message, status


class _BigInt(int):
    """An integer literal too long to accept; kept as a marker so its path can be named."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _BigInt(0)
    return int(text)


_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"\s*:|[\[\]{}]')


def _deep_path(body: bytes) -> list:
    """The keys leading to where nesting passes `MAX_DEPTH` (JSON too deep to parse)."""
    keys: list = []
    depth = 0
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                break
            keys = keys[:depth - 1]
        elif token in (b"]", b"}"):
            depth -= 1
            keys = keys[:depth]
        else:
            keys = keys[:depth - 1] + [token.rsplit(b":", 1)[0].strip()[1:-1].decode(
                "utf-8", "replace")[:60]]
    return keys


def check_json(body: bytes) -> None:
    """Raise `BodyError` naming the field if `body` nests too deep or has a huge integer; JSON
    that does not parse is left for the route to refuse in its own words."""
    try:
        value = json.loads(body, parse_int=_parse_int)
    except RecursionError:
        raise BodyError(["body", *_deep_path(body)],
                        f"JSON nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        return
    stack = [(value, ["body"])]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH + 1:
            raise BodyError(path[:MAX_DEPTH + 1], f"JSON nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            if len(node) > MAX_KEYS:
                raise BodyError(path, f"a JSON object has at most {MAX_KEYS} keys; this one "
                                      f"has {len(node):,}")
            stack.extend((v, [*path, k[:60]]) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, [*path, i]) for i, v in enumerate(node))
        elif isinstance(node, _BigInt):
            raise BodyError(path, f"integers have at most {MAX_INT_DIGITS} digits")


# ----------------------------------------------------------------------------- middleware

def _error(status: int, loc: list, message: str, extra: tuple = ()) -> tuple[dict, bytes]:
    body = json.dumps({"detail": [{"loc": loc, "msg": message, "type": "value_error"}]})
    return ({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *BASE_HEADERS, (b"content-security-policy", API_CSP), *extra]},
        body.encode())


BASE_HEADERS = ((b"x-content-type-options", b"nosniff"),
                (b"referrer-policy", b"same-origin"))
API_CSP = b"default-src 'none'; frame-ancestors 'none'"


class Guard:
    """The ASGI middleware described in the module docstring."""

    def __init__(self, app, config: Settings = settings):
        self.app = app
        self.config = config

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind == "websocket":
            return await self.socket(scope, receive, send)
        if kind != "http":
            return await self.app(scope, receive, send)
        if scope["path"].startswith("/api/"):
            try:
                charge_request(scope)
            except TooMany as err:
                start, body = _error(429, ["server", "rate"],
                                     f"{err.what}: past this server's share for one client; "
                                     f"retry after {err.retry_after} s",
                                     ((b"retry-after", str(err.retry_after).encode()),))
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
        headers = dict(scope["headers"])
        if scope["method"] == "POST":
            refused = await self.check_post(scope, headers, receive)
            if isinstance(refused, tuple):
                start, body = refused
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            receive = refused or receive
        port = (scope.get("server") or (None, None))[1]
        path = scope["path"]

        started = False

        async def send_with_headers(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                out = list(message.get("headers", []))
                html = any(k == b"content-type" and v.startswith(b"text/html") for k, v in out)
                has_csp = any(k == b"content-security-policy" for k, _ in out)
                out += BASE_HEADERS
                if not has_csp:
                    csp = page_csp(path, port, self.config).encode() if html else API_CSP
                    out.append((b"content-security-policy", csp))
                message = {**message, "headers": out}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if not started:  # the server's own 500 would carry none of the headers above
                start, body = _error(500, ["server"], "internal server error; the server's "
                                                      "log has the details")
                await send(start)
                await send({"type": "http.response.body", "body": body})
            raise

    async def check_post(self, scope, headers: dict, receive):
        """None (go on), a replaying `receive` (the body, read and checked), or a refusal."""
        ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        length = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        limit = self.config.max_body_bytes
        if length is not None and (not length.isdigit() or len(length) > 12):
            return _error(400, ["header", "content-length"], "Content-Length must be a number")
        declared = int(length) if length is not None else 0
        if declared > limit:
            return _error(413, ["body"], f"the body is larger than {limit} bytes")
        if declared == 0 and not chunked:
            if ctype in FORM_TYPES:
                return _error(415, ["header", "content-type"],
                              f"a POST may not send {ctype}; send no body or application/json")
            return None
        if ctype != JSON_TYPE:
            return _error(415, ["header", "content-type"],
                          "a POST with a body must send Content-Type: application/json")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away: let the app see the disconnect
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return _error(413, ["body"], f"the body is larger than {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            check_json(body)
        except BodyError as err:
            return _error(err.status, err.loc, err.message)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def socket(self, scope, receive, send):
        """A socket opens only on a socket route, and from a browser only on an allowed
        origin (a client that sends no Origin is not a browser page: no site drives it)."""
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        port = (scope.get("server") or (None, None))[1]
        known = any(route.match(scope["path"]) for route in SOCKET_ROUTES)
        if not known or (origin is not None and not origin_allowed(
                origin.decode("latin-1"), port, self.config)):
            message = await receive()  # websocket.connect
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)
