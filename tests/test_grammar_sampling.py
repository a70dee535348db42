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


# -- which requests the fast path takes (no model: llama_cpp's sampler objects are stood in for) --------


class FakeChain:
    """Stands in for internals.LlamaSampler: records what is added, accepted and sampled."""

    fail_on: str | None = None  # an add_* method that raises, to break the fast path's construction

    def __init__(self, **settings) -> None:  # noqa: ANN003
        self.settings = settings
        self.added: list[str] = []
        self.accepted: list[int] = []
        self.sampled: list[tuple[object, int]] = []

    def __getattr__(self, name: str):  # noqa: ANN204
        if not name.startswith("add_"):
            raise AttributeError(name)

        def add(*args, **kwargs) -> None:  # noqa: ANN002, ANN003
            if name == FakeChain.fail_on:
                raise ValueError(f"{name} broke")
            self.added.append(name)
        return add

    def accept(self, token: int) -> None:
        self.accepted.append(token)

    def sample(self, ctx: object, idx: int) -> int:
        self.sampled.append((ctx, idx))
        return 99


class OwnChain(FakeChain):
    """What the patched llama-cpp-python's own _init_sampler returns here."""


@pytest.fixture
def fast_path(monkeypatch):
    """grammar_sampling installed over a stand-in for llama-cpp-python's own _init_sampler (with its
    real signature), its samplers stood in for: returns ``init_sampler(**settings)`` on a Llama of the
    embedded model's vocabulary size."""
    import functools
    import inspect
    from types import SimpleNamespace

    from llama_cpp import Llama
    from llama_cpp import _internals as internals

    from pipeline.llm import grammar_sampling

    real = Llama._init_sampler

    @functools.wraps(real)  # inspect.signature follows __wrapped__: install() sees the real parameters
    def own(self, **given):  # noqa: ANN001, ANN003, ANN202
        return OwnChain(**given)

    monkeypatch.setattr(Llama, "_init_sampler", own)
    monkeypatch.setattr(internals, "LlamaSampler", FakeChain)
    monkeypatch.setattr(FakeChain, "fail_on", None)
    monkeypatch.delenv(grammar_sampling.SWITCH, raising=False)
    grammar_sampling.install()

    def init_sampler(n_vocab: int = 151_936, **settings):  # noqa: ANN003, ANN202
        llama = SimpleNamespace(_n_vocab=n_vocab, last_n_tokens_size=64, _model=object(), _seed=7)
        return Llama._init_sampler(llama, **settings)
    init_sampler.defaults = {n: p.default
                             for n, p in inspect.signature(real).parameters.items() if n != "self"}
    return init_sampler


GRAMMAR = object()  # any grammar: the fakes never read it


@pytest.mark.parametrize("settings", [
    {"temp": 0.0},
    {"temp": 0.0, "top_k": 0},  # greedy ignores top_k
    {"temp": 0.7, "top_k": 40},
    {"temp": 0.7, "top_k": 1},
    {"temp": 0.7, "top_k": 512},
    {"temp": 1.3, "top_k": 40, "repeat_penalty": 1.1, "top_p": 0.9, "min_p": 0.1},
], ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_the_fast_path_takes_what_it_reproduces(fast_path, settings):
    from pipeline.llm.grammar_sampling import GrammarSampler

    sampler = fast_path(grammar=GRAMMAR, **settings)
    assert isinstance(sampler, GrammarSampler)
    assert sampler._penalties.added == ["add_penalties"] and sampler._grammar.added == ["add_grammar"]
    if settings["temp"] == 0.0:
        assert sampler._tail is None  # greedy
    else:  # llama-cpp-python's own chain, in its order
        assert sampler._tail.added == ["add_top_k", "add_typical", "add_top_p", "add_min_p",
                                       "add_temp", "add_dist"]


@pytest.mark.parametrize(("settings", "why"), [
    ({"temp": 0.0, "grammar": None}, "no grammar"),
    ({"temp": 0.7, "mirostat_mode": 1}, "mirostat 1"),
    ({"temp": 0.7, "mirostat_mode": 2}, "mirostat 2"),
    ({"temp": 0.0, "mirostat_mode": 2}, "mirostat 2"),
    ({"temp": 0.0, "logits_processor": [lambda ids, logits: logits]}, "logits processors"),
    ({"temp": 0.7, "top_k": 0}, "top_k 0"),
    ({"temp": 0.7, "top_k": -1}, "top_k -1"),
    ({"temp": 0.7, "top_k": 513}, "top_k 513"),
    ({"temp": 0.7, "top_k": 40_000}, "top_k 40000"),
    ({"temp": -1.0}, "negative temperature"),
    ({"temp": 0.0, "n_vocab": 512}, "vocabulary of 512"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_what_the_fast_path_declines_gets_llama_cpps_own_sampler(fast_path, settings, why):
    from pipeline.llm.grammar_sampling import _OWN_PARAMETERS, declines

    settings = {"grammar": GRAMMAR, **settings}
    sampler = fast_path(**settings)
    assert isinstance(sampler, OwnChain)
    n_vocab = settings.pop("n_vocab", 151_936)
    assert sampler.settings == settings  # passed on as given
    assert list(fast_path.defaults) == _OWN_PARAMETERS
    assert why in declines({**fast_path.defaults, **settings}, n_vocab)


def test_a_fast_path_that_cannot_start_leaves_the_request_to_llama_cpp(fast_path, monkeypatch, capsys):
    monkeypatch.setattr(FakeChain, "fail_on", "add_grammar")
    sampler = fast_path(grammar=GRAMMAR, temp=0.0)
    assert isinstance(sampler, OwnChain) and sampler.settings == {"grammar": GRAMMAR, "temp": 0.0}
    assert "add_grammar broke" in capsys.readouterr().err


def test_an_error_mid_request_falls_back_and_the_request_answers(fast_path, monkeypatch, capsys):
    """Three tokens picked by the fast path, then it breaks: llama.cpp's own chain for this request
    takes over from the same state (the three tokens accepted into it) and picks every token after."""
    from pipeline.llm.grammar_sampling import GrammarSampler

    sampler = fast_path(grammar=GRAMMAR, temp=0.7, top_k=40, repeat_penalty=1.1)
    picks = iter([11, 12, 13])

    def step(self, ctx, idx):  # noqa: ANN001, ANN202
        self.steps += 1
        return next(picks)  # StopIteration on the fourth: an error inside the fast path
    monkeypatch.setattr(GrammarSampler, "_step", step)
    ctx = object()
    assert [sampler.sample(ctx, i) for i in range(5)] == [11, 12, 13, 99, 99]
    own = sampler.fallback
    assert isinstance(own, OwnChain)
    assert own.settings == {"grammar": GRAMMAR, "temp": 0.7, "top_k": 40, "repeat_penalty": 1.1}
    assert own.accepted == [11, 12, 13]
    assert own.sampled == [(ctx, 3), (ctx, 4)]
    err = capsys.readouterr().err
    assert err.count("own sampler") == 1 and "StopIteration" in err  # one line per request


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no"])
def test_the_environment_switch_keeps_llama_cpps_own_sampler(monkeypatch, value):
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling

    own = Llama._init_sampler
    monkeypatch.setattr(Llama, "_init_sampler", own)  # put back after the test
    with pytest.raises(grammar_sampling.NotInstalled, match=f"{grammar_sampling.SWITCH}={value}"):
        grammar_sampling.install({grammar_sampling.SWITCH: value})
    assert Llama._init_sampler is own
    grammar_sampling.install({grammar_sampling.SWITCH: "1"})
    assert Llama._init_sampler is not own


def test_another_llama_cpp_version_keeps_its_own_sampler(monkeypatch):
    import llama_cpp
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling

    own = Llama._init_sampler
    monkeypatch.setattr(Llama, "_init_sampler", own)
    monkeypatch.setattr(llama_cpp, "__version__", "0.3.37")
    with pytest.raises(grammar_sampling.NotInstalled, match=r"0\.3\.37 is not 0\.3\.36"):
        grammar_sampling.install({})
    assert Llama._init_sampler is own


def test_the_mirrored_version_is_the_pinned_one():
    """grammar_sampling, fast_logprobs and cache_report mirror one llama-cpp-python: the one the project
    installs.
    Each keeps its own copy of the pin: the server loads each from its file, without the project."""
    import re
    from pathlib import Path

    import llama_cpp

    from pipeline.llm import cache_report, fast_logprobs
    from pipeline.llm.grammar_sampling import PINNED_LLAMA_CPP

    assert fast_logprobs.PINNED_LLAMA_CPP == cache_report.PINNED_LLAMA_CPP == PINNED_LLAMA_CPP

    root = Path(__file__).resolve().parent.parent
    assert f'"llama-cpp-python[server]=={PINNED_LLAMA_CPP}"' in (root / "pyproject.toml").read_text()
    assert re.search(rf"^LLAMA_VERSION := {re.escape(PINNED_LLAMA_CPP)}$",
                     (root / "Makefile").read_text(), re.M)
    assert llama_cpp.__version__ == PINNED_LLAMA_CPP


def test_the_server_bootstrap_logs_why_it_keeps_llama_cpps_sampler(tmp_path):
    """The bootstrap loads grammar_sampling from its file: switched off, it says so in one line and
    the server still starts (llama_cpp.server stood in for)."""
    import os
    import subprocess
    import sys

    from pipeline.llm.local_model import _BOOTSTRAP, PATCH_FILES

    code = _BOOTSTRAP.replace('runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)',
                              'print("server started", file=sys.stderr)')
    env = {**os.environ, "UNSPECIFIC_GRAMMAR_SAMPLING": "0", "UNSPECIFIC_FAST_LOGPROBS": "off",
           "UNSPECIFIC_CACHE_REPORT": "no", "UNSPECIFIC_LAST_LOGITS": "false", "UNSPECIFIC_PROMPT_BATCH": "0"}
    files = [str(f) for f in PATCH_FILES]
    result = subprocess.run([sys.executable, "-c", code, str(os.getpid()), *files], capture_output=True,
                            text=True, env=env, timeout=60)
    lines = result.stderr.splitlines()
    assert lines == ["grammar sampling not installed, llama-cpp-python's own is used: "
                     "NotInstalled: turned off by UNSPECIFIC_GRAMMAR_SAMPLING=0",
                     "fast log-probabilities not installed, llama-cpp-python's own is used: "
                     "NotInstalled: turned off by UNSPECIFIC_FAST_LOGPROBS=off",
                     "last logits not installed, llama-cpp-python's own is used: "
                     "NotInstalled: turned off by UNSPECIFIC_LAST_LOGITS=false",
                     "cached-token count not installed, llama-cpp-python's own is used: "
                     "NotInstalled: turned off by UNSPECIFIC_CACHE_REPORT=no",
                     "prompt lists not installed, llama-cpp-python's own is used: "
                     "NotInstalled: turned off by UNSPECIFIC_PROMPT_BATCH=0", "server started"]
    env.pop("UNSPECIFIC_FAST_LOGPROBS")
    env.pop("UNSPECIFIC_CACHE_REPORT")
    result = subprocess.run([sys.executable, "-c", code, str(os.getpid()), *files], capture_output=True,
                            text=True, env=env, timeout=60)
    lines = result.stderr.splitlines()
    assert "log-probabilities: read by pipeline.llm.fast_logprobs" in lines
    assert "cached prompt tokens: said by pipeline.llm.cache_report" in lines


# -- against llama-cpp-python's own chain --------------------------------------------------------------


def test_install_refuses_a_llama_cpp_that_samples_otherwise(monkeypatch):
    """Another llama-cpp-python may build its chain otherwise: then nothing is swapped, and the
    server's bootstrap logs why and keeps llama-cpp-python's own sampling."""
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling
    def other_init_sampler(self, top_k=40, temp=0.8, grammar=None,  # noqa: ANN001, ANN202
                           dry_multiplier=0.0):
        return None

    monkeypatch.setattr(Llama, "_init_sampler", other_init_sampler)
    with pytest.raises(grammar_sampling.NotInstalled, match="dry_multiplier"):
        grammar_sampling.install({})
    assert Llama._init_sampler is other_init_sampler


@pytest.fixture(scope="module")
def llama():
    from llama_cpp import Llama

    from pipeline.llm.local_model import N_THREADS
    from pipeline.llm.model_file import model_path

    model = Llama(model_path=str(model_path()), n_ctx=2048, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                  verbose=False)
    yield model
    model.close()


def _reply(llama, messages, grammar_text: str, **params) -> str:  # noqa: ANN001
    from llama_cpp import LlamaGrammar

    # A short unrelated prompt first, so both ways read the measured prompt from the same state.
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    reply = llama.create_chat_completion(messages=messages,
                                         grammar=LlamaGrammar.from_string(grammar_text, verbose=False),
                                         repeat_penalty=1.1, **params)  # the server's default penalty
    return reply["choices"][0]["message"]["content"]


def _both_ways(llama, monkeypatch, messages, grammar_text: str, **params):  # noqa: ANN001, ANN202
    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling
    own = _reply(llama, messages, grammar_text, **params)
    monkeypatch.setattr(Llama, "_init_sampler", Llama._init_sampler)  # put back after the test
    grammar_sampling.install({})
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
    own, ours, sampler = _both_ways(llama, monkeypatch, messages,
                                    json_schema_to_gbnf(json.dumps(list_schema(3, with_task=False))),
                                    temperature=0.7, seed=3, max_tokens=160)
    assert ours == own
    assert len(json.loads(ours)["constraints"]) == 3
    assert sampler.full_checks < sampler.steps


@pytest.mark.real_model
def test_a_fast_path_breaking_mid_reply_gives_the_chains_own_reply(llama, monkeypatch, capsys):
    """An error inside the fast path at the 10th token: the request still answers, with the reply
    llama-cpp-python's own chain gives (greedy: its state is rebuilt from the tokens so far)."""
    from pipeline.llm.grammar_sampling import GrammarSampler

    template = load_template("judge_lines")
    messages = template.render(text=defuse(TEXT), constraints=numbered(CONSTRAINTS), n=len(CONSTRAINTS))
    working = GrammarSampler._step

    def breaks_at_ten(self, ctx, idx):  # noqa: ANN001, ANN202
        if self.steps == 9:
            raise RuntimeError("simulated failure in the fast path")
        return working(self, ctx, idx)
    monkeypatch.setattr(GrammarSampler, "_step", breaks_at_ten)
    own, ours, sampler = _both_ways(llama, monkeypatch, messages, lines_grammar(len(CONSTRAINTS)),
                                    temperature=0.0, max_tokens=120)
    assert isinstance(sampler, GrammarSampler) and sampler.fallback is not None
    assert sampler.steps == 9  # the fast path picked nine tokens, llama.cpp's own chain the rest
    assert ours == own
    assert "simulated failure in the fast path" in capsys.readouterr().err
