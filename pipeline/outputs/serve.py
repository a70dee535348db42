"""`unspecific serve`: the app in a browser, through textual-serve.

textual-serve runs one app process per browser session (each websocket starts its own
``unspecific tui``), so several people work at once, each in their own session. The process is
started through the command line, never imported: the pipeline knows nothing of the app.

Safety by default:
- it binds 127.0.0.1; any other address must be asked for with ``--host``;
- an address other than the loopback one requires a one-time access token (made fresh at each
  start, printed once). A request without it gets 403 and an empty body: no page, no script,
  no websocket. The token travels once in the URL; the server then sets it as an HttpOnly,
  SameSite=Strict cookie so that the page's scripts and websocket carry it;
- the store opens read-only (``tui --read-only``): the Build screen refuses to run any stage, so
  no LLM is called, unless ``allow_run`` is given.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "localhost", "::1")
COOKIE = "unspecific_token"


@dataclass(frozen=True)
class ServeOptions:
    store: Path
    host: str = "127.0.0.1"
    port: int = 8000
    config: str | None = None
    run: str | None = None
    allow_run: bool = False
    public_url: str | None = None  # as browsers reach it (a proxy); default: the request's own host


def needs_token(host: str) -> bool:
    return host not in LOOPBACK


def new_token() -> str:
    return secrets.token_urlsafe(24)


def app_command(options: ServeOptions) -> str:
    """The command each session runs: this Python, this store, read-only unless allow_run."""
    argv = [sys.executable, "-m", "pipeline.cli", "--store", str(options.store)]
    if options.config:
        argv += ["--config", options.config]
    argv.append("tui")
    if options.run:
        argv += ["--run", options.run]
    if not options.allow_run:
        argv.append("--read-only")
    return shlex.join(argv)


def access_url(options: ServeOptions, token: str | None) -> str:
    base = (options.public_url
            or f"http://{'[' + options.host + ']' if ':' in options.host else options.host}:{options.port}")
    return base.rstrip("/") + "/" + (f"?token={token}" if token else "")


def make_server(options: ServeOptions, token: str | None) -> Any:
    """A textual_serve Server for the app, with the token check in front of every route."""
    from aiohttp import web
    from textual_serve.server import Server

    class _Server(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            if token is not None:
                app.middlewares.insert(0, _token_middleware(token))
            return app

        async def handle_index(self, request: web.Request) -> Any:
            # textual-serve writes its websocket URL from one fixed public URL; a server bound to
            # another address is reached by whatever name the browser used, so take the request's.
            if options.public_url is None:
                self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        def initialize_logging(self) -> None:
            super().initialize_logging()
            # aiohttp's access log writes each request line, the token's query string with it.
            logging.getLogger("aiohttp.access").disabled = True

        async def on_startup(self, app: web.Application) -> None:
            # textual-serve prints its logo and its own URL (without the token) here: say nothing;
            # serve_cmd prints the one URL to use.
            return None

    return _Server(app_command(options), host=options.host, port=options.port, title="unspecific",
                   public_url=options.public_url)


def _token_middleware(token: str) -> Any:
    from aiohttp import web

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        given = request.query.get("token")
        if given is not None and hmac.compare_digest(given, token):
            response = await handler(request)
            if isinstance(response, web.Response) or response.prepared is False:
                response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
            return response
        cookie = request.cookies.get(COOKIE)
        if cookie is not None and hmac.compare_digest(cookie, token):
            return await handler(request)
        # Nothing: no page, no hint of what runs here.
        return web.Response(status=403, body=b"")

    return check
