"""pipeline.llm.prompt_batch: several prompts scored in one request on the embedded server. Their next
token's alternatives are the ones one chat call each gives (the real model, in process), the shared
prefix is evaluated once, and the server's route serves the list (the real server)."""

from __future__ import annotations

import json
import math
import urllib.request

import numpy as np
import pytest

from pipeline.llm import prompt_batch
from pipeline.llm.prompts import chatml, load_template
from pipeline.stages.judging import yes_probability
from tests.support.llama import refuses_to_install

TEXT = ("The council voted 7 to 4 on Tuesday to close the old bridge to cars from March. "
        "The mayor said repairs "
        "would cost more than a new crossing, while shop owners warned that trade would fall.")
CONSTRAINTS = ["Give the result of the council's vote.", "Mention a dragon.", "Say when the bridge closes.",
               "Quote a shop owner by name."]


def _messages(constraint: str) -> list[dict[str, str]]:
    return load_template("judge_yes_no").render(text=TEXT, constraint=constraint)


def test_the_best_alternatives() -> None:
    logits = np.array([0.0, 3.0, 1.0, 3.5, -2.0], dtype=np.float32)
    best = prompt_batch.top_alternatives(logits, 3)
    assert [t for t, _ in best] == [3, 1, 2]
    total = math.log(sum(math.exp(v) for v in logits))
    assert [lp for _, lp in best] == pytest.approx([3.5 - total, 3.0 - total, 1.0 - total])


def test_install_refuses_another_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    refuses_to_install(prompt_batch, "off", monkeypatch)


def test_chatml_is_the_chat_formats_own_prompt() -> None:
    from llama_cpp.llama_chat_format import format_chatml

    messages = _messages(CONSTRAINTS[0])
    assert chatml(messages) == format_chatml(messages).prompt


@pytest.mark.real_model
def test_scored_together_as_one_call_each(llama_judge) -> None:  # noqa: ANN001
    llama = llama_judge
    alone = []
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)  # a known state
    for constraint in CONSTRAINTS:  # one call a constraint, as the judge asks them, each after the last
        reply = llama.create_chat_completion(messages=_messages(constraint), max_tokens=1, temperature=0.0,
                                             logprobs=True, top_logprobs=20)
        content = reply["choices"][0]["logprobs"]["content"][0]
        alone.append(yes_probability({t["token"]: t["logprob"] for t in content["top_logprobs"]}))
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    scored, total, cached = prompt_batch.score_prompts(llama, [chatml(_messages(c)) for c in CONSTRAINTS], 20)
    body = prompt_batch.completion_body(llama, "m", scored, total, cached)
    together = [yes_probability(c["logprobs"]["top_logprobs"][0]) for c in body["choices"]]
    # The same tokens evaluated in the same batches: the same numbers, not merely close ones.
    assert together == pytest.approx(alone, abs=1e-6)
    # The text (every prompt's shared prefix) counted once: the other prompts read it from the cache.
    assert cached >= (len(CONSTRAINTS) - 1) * 80 and body["usage"]["prompt_tokens"] == total


ASKS = ("say who voted.", "say what the mayor said.", "say what shop owners feared.")
GREEDY = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "typical_p": 1.0, "temp": 0.0, "repeat_penalty": 1.0,
          "frequency_penalty": 0.0, "presence_penalty": 0.0, "tfs_z": 1.0, "mirostat_mode": 0,
          "mirostat_tau": 5.0,
          "mirostat_eta": 0.1, "penalize_nl": True, "logits_processor": None}
WHO = {"type": "object", "properties": {"who": {"type": "string", "maxLength": 60}}, "required": ["who"]}


def test_the_shared_prefix_leaves_each_prompt_its_last_token() -> None:
    assert prompt_batch._shared_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert prompt_batch._shared_length([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shorter keeps its last token
    assert prompt_batch._shared_length([[7, 1], [8, 1]]) == 0


@pytest.mark.real_model
def test_written_together_as_one_call_each(llama_judge) -> None:  # noqa: ANN001
    """Greedy: the replies written together are the ones a call each writes, token for token. Under
    a JSON grammar, drawn at a seed, each is the JSON it holds it to. (Greedy under the grammar, a
    near tie between " :" and ":" went the other way in one of three: a batch of three sums its
    products in another order than a batch of one.)"""
    from llama_cpp.llama_grammar import LlamaGrammar

    llama = llama_judge
    prompts = [chatml([{"role": "user", "content": f"{TEXT}\n\nIn one short sentence, {ask}"}])
               for ask in ASKS]
    alone = [llama.create_completion(p, max_tokens=16, temperature=0.0,
                                     repeat_penalty=1.0)["choices"][0]["text"]
             for p in prompts]
    replies, total, cached = prompt_batch.generate_prompts(llama, prompts, GREEDY, seed=1,
                                                           max_tokens=16, grammar=None)
    assert [text for text, _finish, _n in replies] == alone
    # The text shared by the prompts is evaluated once: every prompt after the first reads it.
    assert cached >= (len(prompts) - 1) * 40
    assert total == sum(len(llama.tokenize(p.encode(), special=True)) for p in prompts)
    grammar = LlamaGrammar.from_json_schema(json.dumps(WHO), verbose=False)
    drawn, _, _ = prompt_batch.generate_prompts(llama, prompts, GREEDY | {"temp": 0.7}, seed=3, max_tokens=40,
                                                grammar=grammar)
    for text, finish, n in drawn:
        assert finish == "stop" and 0 < n <= 40 and set(json.loads(text)) == {"who"}
    # The server's own context is left as a request leaves it: a call after answers as before.
    again = llama.create_completion(prompts[0], max_tokens=16, temperature=0.0, repeat_penalty=1.0)
    assert again["choices"][0]["text"] == alone[0]


@pytest.fixture(scope="module")
def llama_judge():  # noqa: ANN201
    from tests.support.llama import in_process_llama

    model = in_process_llama(n_ctx=2048)
    yield model
    model.close()


@pytest.mark.real_model
def test_the_embedded_server_serves_a_list_of_prompts(local_server_url: str) -> None:
    prompts = [chatml(_messages(c)) for c in CONSTRAINTS[:2]]
    body = json.dumps({"prompt": prompts, "max_tokens": 1, "logprobs": 5, "temperature": 0}).encode()
    request = urllib.request.Request(f"{local_server_url}/completions", data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.loads(response.read())
    assert [c["index"] for c in reply["choices"]] == [0, 1]
    assert all(len(c["logprobs"]["top_logprobs"][0]) == 5 for c in reply["choices"])
    assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


@pytest.mark.real_model
def test_the_embedded_server_writes_a_list_of_prompts(local_server_url: str) -> None:
    prompts = [chatml([{"role": "user", "content": f"{TEXT}\n\nIn one short sentence, {ask}"}])
               for ask in ASKS[:2]]
    body = json.dumps({"prompt": prompts, "max_tokens": 40, "temperature": 0.7, "seed": 5,
                       "response_format": {"type": "json_object", "schema": WHO}}).encode()
    request = urllib.request.Request(f"{local_server_url}/completions", data=body,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.loads(response.read())
    assert [c["index"] for c in reply["choices"]] == [0, 1]
    assert all(set(json.loads(c["text"])) == {"who"} for c in reply["choices"])
    assert (reply["usage"]["completion_tokens"] > 0
            and reply["usage"]["prompt_tokens_details"]["cached_tokens"] > 0)
