"""Shared by the build tests: now lives in pipeline.fake_responders (the benches use it too)."""

from pipeline.fake_responders import (  # noqa: F401
    ARTICLE_A,
    ARTICLE_B,
    DUPLICATE,
    LEAKY,
    NEAR_DUPLICATE,
    ScriptedModel,
    _block,
    _numbered_items,
    config_toml,
    fake_config,
    kind_of,
    make_store,
)
