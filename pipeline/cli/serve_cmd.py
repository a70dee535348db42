"""`unspecific serve`: the app in a browser (textual-serve), read-only and on 127.0.0.1 by default."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="the app in a browser: one session per visitor, read-only store, 127.0.0.1 by default",
        description="Serve the app through textual-serve. Each browser session runs its "
                    "own app on the store, "
        "opened read-only: no stage runs and no LLM is called unless --allow-run. It "
        "binds 127.0.0.1; another address needs --host and a one-time access token, printed at start.",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1); any other requires the printed access token")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--run", default=None, help="select this run at start")
    p.add_argument("--allow-run", action="store_true",
                   help="open the store for writing: the Build screen may run stages and call LLMs")
    p.add_argument("--public-url", default=None,
                   help="the URL browsers use, behind a proxy (default: as requested)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline.cli import store_path
    from pipeline.cli.common import console
    from pipeline.core.errors import StoreError
    from pipeline.outputs.serve import ServeOptions, access_url, make_server, needs_token, new_token

    path = Path(store_path(args))
    if not path.exists():
        raise StoreError(f"{path}: no store here (run `unspecific init`, `make demo`, or pass --store)")
    options = ServeOptions(store=path.resolve(), host=args.host, port=args.port,
                           config=getattr(args, "config", None),
                           run=args.run, allow_run=args.allow_run, public_url=args.public_url)
    token = new_token() if needs_token(args.host) else None
    out = console()
    mode = "[bold yellow]writable: stages may run and call LLMs[/]" if args.allow_run else "read-only"
    out.print(f"serving {path} ({mode})")
    if token:
        out.print(f"bound to {args.host}: open this URL once, its access token is good "
                  "until the server stops")
    # print, not out.print: the URL must reach a pipe unwrapped (tests and scripts read it).
    print(access_url(options, token), flush=True)
    out.print("[dim]ctrl+c stops the server[/]")
    make_server(options, token).serve()
    return 0
