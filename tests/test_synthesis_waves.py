"""The "more constraints" rounds written together: on an endpoint with ``batch_generation`` (the
embedded server, pipeline.llm.prompt_batch), the rounds a list still needs go as one completions
request with a list of ChatML prompts, each the prompt a round of its own sends; their items are
kept in the rounds' order as one at a time would keep them. An endpoint that refuses the list is
said once and asked one round at a time (the fake server answers each prompt as a chat)."""

from __future__ import annotations

import json
import re

from pipeline.core.config import parse_config
from pipeline.llm.client import LLMClient
from pipeline.llm.prompts import chatml
from pipeline.stages.synthesis import ASPECTS, MAX_WAVE, MORE_CHUNK, synthesize_single
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer, Reply
from tests.fakes.responders import ARTICLE_A, ScriptedModel, kind_of

ASK = re.compile(r"Write EXACTLY (\d+) more")


def _config(base_url: str, *, together: bool):  # noqa: ANN202
    return parse_config({"endpoints": {"fake": {"base_url": base_url, "model": "fake-model", "max_retries": 1,
                                                "structured": "json_object_schema",
                                                "batch_generation": together}},
                         "roles": {"generator": "fake"}})


def _rounds(model: ScriptedModel, *, junk_round: int | None = None, repeat: int = 0):  # noqa: ANN202
    """``model``, whose rounds each give what they ask, all distinct, except ``repeat`` items of each
    that say the same thing again, and the round about ASPECTS[junk_round], which writes no list."""
    made = [0]

    def responder(request):  # noqa: ANN001, ANN202
        if kind_of(request) != "constraints_more":
            return model(request)
        ask = request["messages"][-1]["content"]
        if junk_round is not None and ASPECTS[junk_round] in ask:
            return Reply(text="I cannot think of more.")
        k = int(ASK.search(ask).group(1))
        items = [f"Describe distinct angle number {made[0] + j} of the story at length."
                 for j in range(k - repeat)]
        items += ["Describe distinct angle number 0 of the story at length."] * repeat
        made[0] += k
        return Reply(text=json.dumps({"constraints": items}))

    return responder


async def _synthesize(tmp_path, responder, *, together: bool, lists: bool = True,
                      short_by: int = 25):  # noqa: ANN001, ANN202
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(responder) as server:
        server.prompt_lists = lists
        client = LLMClient(_config(server.base_url, together=together),
                           open_store(tmp_path / f"{together}.sqlite"),
                           backoff_base_s=0.01, on_event=lambda k, d: events.append((k, d)))
        result = await synthesize_single(client, "fake", ARTICLE_A, 39, domain="news", repair_rounds=8)
        await client.aclose()
    return result, server.requests, events


async def test_the_rounds_a_list_needs_go_as_one_request_of_their_prompts(tmp_path) -> None:
    model = ScriptedModel(short_by=25, with_flags=False)
    result, requests, _ = await _synthesize(tmp_path, _rounds(model), together=True)
    first, wave, *rest = requests
    assert rest == []  # 25 missing: one request of rounds, nothing after it
    prompts = wave["prompt"]
    assert isinstance(prompts, list) and len(prompts) == MAX_WAVE == -(-25 // MORE_CHUNK) + 1
    # Each is the prompt a round of its own sends: the first prompt, its reply, one ask about one aspect.
    for j, prompt in enumerate(prompts):
        assert prompt.startswith(chatml(first["messages"])) and prompt.count("<|im_start|>user") == 2
        assert ASPECTS[j] in prompt.rpartition("<|im_start|>user")[2]
        assert f"Write EXACTLY {MORE_CHUNK} more" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert wave["seed"] == 1 and wave["temperature"] == 0.7 and not wave.get("logprobs")
    assert wave["response_format"]["schema"]["properties"]["constraints"]["minItems"] == MORE_CHUNK
    # Kept in the rounds' order, only as many as were missing.
    assert len(result.constraints) == 39 and len(set(result.constraints)) == 39
    assert result.constraints[14:17] == [f"Describe distinct angle number {i} of the story at length."
                                         for i in range(3)]
    assert result.asked_more == MAX_WAVE * MORE_CHUNK


async def test_written_together_or_one_at_a_time_the_first_round_asks_the_same(tmp_path) -> None:
    model = ScriptedModel(short_by=25, with_flags=False)
    _, alone, _ = await _synthesize(tmp_path, _rounds(model), together=False)
    _, together, _ = await _synthesize(tmp_path, _rounds(model), together=True)
    rounds = [r for r in alone if kind_of(r) == "constraints_more"]
    assert [int(ASK.search(r["messages"][-1]["content"]).group(1)) for r in rounds] == [10, 10, 5]
    assert chatml(rounds[0]["messages"]) == together[1]["prompt"][0]
    assert rounds[0]["seed"] == together[1]["seed"] == 1


async def test_a_wave_that_falls_short_is_followed_by_another(tmp_path) -> None:
    """Half of each round repeats the list, and one round writes no list at all: the items the others
    gave are kept, and the next request asks for what is still missing, about the next aspects."""
    result, requests, _ = await _synthesize(tmp_path, _rounds(ScriptedModel(short_by=25, with_flags=False),
                                                              junk_round=1, repeat=5), together=True)
    waves = [r["prompt"] for r in requests[1:]]
    assert [len(w) for w in waves] == [4, 2]  # 15 new of 25 (5 of each of 3 usable rounds); 10 missing: 1 + 1
    assert ASPECTS[4] in waves[1][0] and "EXACTLY 10 more" in waves[1][0]
    assert len(result.constraints) == 39 and len(set(result.constraints)) == 39


async def test_an_endpoint_that_refuses_a_list_is_asked_one_round_at_a_time(tmp_path) -> None:
    result, requests, events = await _synthesize(
        tmp_path, _rounds(ScriptedModel(short_by=25, with_flags=False)), together=True, lists=False)
    refused, *rounds = requests[1:]
    assert isinstance(refused["prompt"], list)
    assert [int(ASK.search(r["messages"][-1]["content"]).group(1)) for r in rounds] == [10, 10, 5]
    assert len(result.constraints) == 39
    notices = [d for k, d in events if k == "notice" and "refused a list of prompts" in d]
    assert len(notices) == 1 and "one prompt a call" in notices[0]
