"""pipeline.llm.grammar_sampling: the embedded server's grammar-held sampling picks the tokens
llama-cpp-python's own chain picks, checking the grammar on a few tokens instead of all."""

from __future__ import annotations

import json

import pytest

from pipeline.llm.prompts import defuse, load_template, numbered
from pipeline.stages.judging import lines_grammar
from pipeline.stages.synthesis import list_schema

TEXT = (
    "The Harwick council voted on Thursday to close the old library on Mill Street and move its "
    "books to the school, after a meeting in which forty residents spoke against the plan. The "
    "treasurer said the building needs a new roof that the town cannot pay for this year."
)
CONSTRAINTS = [
    "Say how many residents spoke at the meeting.",
    "Name the street of the library.",
    "Quote the mayor's closing speech word for word.",
]


def test_install_refuses_a_llama_cpp_that_samples_otherwise(monkeypatch):
    """Another llama-cpp-python may build its chain otherwise: then nothing is swapped, and the
    server's bootstrap logs why and keeps llama-cpp-python's own sampling."""
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling
    def other_init_sampler(self, top_k=40, temp=0.8, grammar=None, dry_multiplier=0.0):  # noqa: ANN001, ANN202
        return None

    monkeypatch.setattr(Llama, "_init_sampler", other_init_sampler)
    with pytest.raises(RuntimeError, match="dry_multiplier"):
        grammar_sampling.install()
    assert Llama._init_sampler is other_init_sampler


@pytest.fixture(scope="module")
def llama():
    from llama_cpp import Llama

    from pipeline.llm.local_model import N_THREADS, model_path

    model = Llama(model_path=str(model_path()), n_ctx=2048, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                  verbose=False)
    yield model
    model.close()


def _reply(llama, messages, grammar_text: str, **params) -> str:  # noqa: ANN001
    from llama_cpp import LlamaGrammar

    # A short unrelated prompt first, so both ways read the measured prompt from the same state.
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    reply = llama.create_chat_completion(messages=messages, grammar=LlamaGrammar.from_string(grammar_text, verbose=False),
                                         repeat_penalty=1.1, **params)  # the server's default penalty
    return reply["choices"][0]["message"]["content"]


def _both_ways(llama, monkeypatch, messages, grammar_text: str, **params):  # noqa: ANN001, ANN202
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling
    own = _reply(llama, messages, grammar_text, **params)
    monkeypatch.setattr(Llama, "_init_sampler", Llama._init_sampler)  # put back after the test
    grammar_sampling.install()
    ours = _reply(llama, messages, grammar_text, **params)
    return own, ours, llama._sampler


@pytest.mark.real_model
def test_greedy_judge_lines_are_the_chains_own(llama, monkeypatch):
    template = load_template("judge_lines")
    messages = template.render(text=defuse(TEXT), constraints=numbered(CONSTRAINTS), n=len(CONSTRAINTS))
    own, ours, sampler = _both_ways(llama, monkeypatch, messages, lines_grammar(len(CONSTRAINTS)),
                                    temperature=0.0, max_tokens=120)
    from pipeline.llm.grammar_sampling import GrammarSampler

    assert isinstance(sampler, GrammarSampler)
    assert ours == own
    assert [line.split(".")[0] for line in ours.splitlines()] == ["1", "2", "3"]
    # The whole vocabulary was checked on a few steps at most, not on every one.
    assert sampler.full_checks < sampler.steps / 3


@pytest.mark.real_model
def test_seeded_json_draw_is_the_chains_own(llama, monkeypatch):
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    # The shape of a "more constraints" round: a seeded draw at temperature 0.7 under its schema.
    messages = [{"role": "user", "content": "Write three writing constraints for a news article about a town "
                                            "council closing its library. Reply in JSON."}]
    own, ours, sampler = _both_ways(llama, monkeypatch, messages, json_schema_to_gbnf(json.dumps(list_schema(3, with_task=False))),
                                    temperature=0.7, seed=3, max_tokens=160)
    assert ours == own
    assert len(json.loads(ours)["constraints"]) == 3
    assert sampler.full_checks < sampler.steps
