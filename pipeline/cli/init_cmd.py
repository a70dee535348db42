"""`unspecific init`: create the store and, if absent, a commented unspecific.toml."""

from __future__ import annotations

import argparse
from pathlib import Path

TEMPLATE = '''# unspecific configuration. Keys never go here: name the environment variable instead.
# With no [endpoints], every role uses the embedded local model ("local"), started by each run.

# [endpoints.gpt]
# base_url = "https://api.openai.com/v1"
# model = "gpt-4o-mini"
# api_key_env = "OPENAI_API_KEY"
# concurrency = 8
# requests_per_minute = 500
# price_prompt_per_mtok = 0.15
# price_completion_per_mtok = 0.60
# price_cached_prompt_per_mtok = 0.075   # a prompt token read from its prompt cache (unset: the prompt price)
# structured = "json_schema"      # OpenAI form; llama.cpp wants "json_object_schema"
# gbnf = false                    # true for llama.cpp's server: it takes a GBNF `grammar` field
# judging = "batched"             # how it judges: batched | per_constraint | yes_no

[roles]
generator = "local"
judges = ["local"]
summarizer = "local"
models_under_test = ["local"]

[build]
n_constraints = 39
article_words = 500

[evaluate]
ratios = [0.25]
# judging = "batched"           # one mode for every judge; unset, each judge's own (yes_no for "local")
# evaluate fails when fewer verdicts than this share of those expected were given in a group
min_coverage = 0.95
'''


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="create the store and a starter unspecific.toml")
    p.add_argument("--force", action="store_true", help="overwrite an existing unspecific.toml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipeline.cli.common import console, open_store_from

    store = open_store_from(args, create=True)
    out = console()
    out.print(f"store [bold]{store.path}[/] ready (schema {store.schema_version})")
    cfg = Path(args.config or "unspecific.toml")
    if cfg.exists() and not args.force:
        out.print(f"config [bold]{cfg}[/] exists; left as it is")
    else:
        cfg.write_text(TEMPLATE, encoding="utf-8")
        out.print(f"config [bold]{cfg}[/] written")
    return 0
