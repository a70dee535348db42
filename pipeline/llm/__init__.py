"""Talking to language models: the one client (cache, transport with retries and pacing,
pools, pricing), batch mode, the embedded llama.cpp model, prompt templates and the output
contract of generated prose.

May import: pipeline.core, pipeline.store."""
