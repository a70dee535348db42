"""The LLM call cache (the store's ``llm_calls`` table): list, stats, prune, clear.

The cache key is the sha256 of a JSON object holding
  - ``base_url``  the endpoint's URL as configured ("local" for the embedded model, whatever
    port it runs on; "pool" for a pool of endpoints, so the member that answered is not part of it),
  - ``model``     the model name sent to the endpoint,
  - ``messages``  the rendered chat messages, exactly as sent,
  - ``params``    the sampling parameters (temperature, max_tokens, seed, top_p) and the
    structured-output format (``response_format``, schema included),
  - ``template``  the hash of the prompt template file that rendered the messages.
So a repeated call is free; editing a prompt file, changing a parameter or pointing a role at
another model asks again. Only replies the caller accepted are stored: errors, empty replies and
replies that broke the output format never are. The API key is not part of the key or the row.

Deleting cache rows loses no results: stages keep what they produced in their own tables;
the cache only saves paying again for a call that is repeated.

This module owns the cache: the key (``cache_key``), reading and writing a call (``cache_get``,
``cache_put``, used by pipeline.llm.client), and what users do with it (list, stats, prune,
clear). ``unspecific cache`` (pipeline/cli/cache_cmd.py) is a thin layer over these functions;
the SQL is pipeline.store.llm_calls.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import TYPE_CHECKING, Any

from pipeline.core.config import Endpoint
from pipeline.llm.call import Completion, decode_logprobs, encode_logprobs, stored_request
from pipeline.store import batches as batch_table
from pipeline.store import llm_calls
from pipeline.store.database import Store, now

if TYPE_CHECKING:
    from pipeline.llm.prompts import Template


def cache_key(endpoint: Endpoint, messages: list[dict[str, str]], params: dict[str, Any],
              template_hash: str) -> str:
    """The documented cache key: URL, model, messages, parameters, template hash."""
    blob = json.dumps(
        {
            "base_url": endpoint.cache_url,
            "model": endpoint.model,
            "messages": messages,
            "params": params,
            "template": template_hash,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def cache_get(store: Store, key: str) -> Completion | None:
    """The cached answer to a call, or None. A row with an empty reply answers nothing."""
    row = llm_calls.cached_reply(store, key)
    if row is None or not row.response.strip():
        return None
    return Completion(row.response, row.prompt_tokens, row.completion_tokens, 0.0, True, row.id,
                      0.0, row.endpoint,
                      logprobs=decode_logprobs(row.logprobs), cached_prompt_tokens=row.cached_prompt_tokens)


def cache_put(store: Store, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
              params: dict[str, Any], completion: Completion, run_id: str | None) -> int:
    """Cache an accepted answer and commit; returns the call's id. A batch answer leaves its
    batch request: the cache holds it now."""
    call_id = llm_calls.put_call(store, llm_calls.NewCall(
        key, ep.name, ep.model, template.name if template else None, template.hash if template else None,
        stored_request(messages, params), completion.text, completion.prompt_tokens,
        completion.completion_tokens,
        completion.cost, round(completion.latency_s, 4), run_id, now(), completion.via,
        encode_logprobs(completion.logprobs), completion.cached_prompt_tokens,
    ))
    if completion.via == "batch":
        # Deleted rather than emptied: an emptied row leaves its page mostly unused (about 2 kB a
        # call at scale); a deleted one frees it for reuse.
        batch_table.delete_request(store, key)
    store.commit()  # a finished call is never paid for twice
    return call_id


def list_calls(store: Store, *, endpoint: str | None = None, template: str | None = None,
               limit: int = 30) -> list[dict[str, Any]]:
    return llm_calls.newest_calls(store, endpoint=endpoint, template=template, limit=limit)


def cache_stats(store: Store) -> list[dict[str, Any]]:
    """Per endpoint, model and template: calls, tokens, cost (what the cache saves on a rerun), bytes."""
    return llm_calls.calls_by_endpoint_model_template(store)


def stale_call_ids(store: Store) -> list[int]:
    """Calls whose template file changed (another hash) or no longer exists."""
    from pipeline.core.errors import PromptError
    from pipeline.llm.prompts import load_template

    current: dict[str, str | None] = {}
    stale = []
    for call in llm_calls.templated_calls(store):
        if call.template not in current:
            try:
                current[call.template] = load_template(call.template).hash
            except PromptError:
                current[call.template] = None
        if current[call.template] != call.template_hash:
            stale.append(call.id)
    return stale


def prune_cache(
    store: Store,
    *,
    older_than_days: float | None = None,
    template: str | None = None,
    endpoint: str | None = None,
    stale: bool = False,
) -> int:
    """Delete the calls matching every filter given; returns how many. At least one filter."""
    from pipeline.core.errors import UnspecificError

    if older_than_days is None and template is None and endpoint is None and not stale:
        raise UnspecificError("cache prune: give --older-than, --template, --endpoint or --stale (or use "
                              "`cache clear --yes`)")
    if older_than_days is not None and older_than_days < 0:
        raise UnspecificError(f"cache prune: --older-than must be positive, got {older_than_days}")
    before = None
    if older_than_days is not None:
        from datetime import datetime, timedelta

        before = (datetime.now(UTC) - timedelta(days=older_than_days)).isoformat(timespec="seconds")
    ids = None
    if stale:
        ids = stale_call_ids(store)
        if not ids:
            return 0
    return llm_calls.delete_calls(store, endpoint=endpoint, template=template, before=before, ids=ids)


def clear_cache(store: Store) -> int:
    """Delete every cached call and give the space back; returns how many."""
    return llm_calls.delete_all_calls(store)
