"""pipeline.llm.fast_logprobs: the embedded server's log-probabilities, computed a row at a time and read
from each row's best values, are the ones llama-cpp-python's own code gives (the real model, in process),
and a request asking for more alternatives than it keeps is served by the library's own code."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.llm import fast_logprobs
from tests.support.llama import refuses_to_install


def test_rows_read_lazily_give_the_librarys_best_alternatives() -> None:
    from llama_cpp import Llama

    rng = np.random.default_rng(0)
    scores = (rng.standard_normal((40, 151_936)) * 3).astype(np.float32)
    own = Llama.__dict__["logits_to_logprobs"].__func__(scores)[30:]
    lazy = fast_logprobs.LazyRows(scores)[30:]
    assert len(lazy) == 10
    for want, got in zip(own, lazy, strict=True):
        best_own = sorted(zip(want, range(len(want))), reverse=True)[:20]
        best_lazy = sorted(zip(got, range(len(got))), reverse=True)[:20]
        assert [i for _, i in best_lazy] == [i for _, i in best_own]
        assert [v for v, _ in best_lazy] == pytest.approx([float(v) for v, _ in best_own], abs=1e-5)
        assert got[1234] == pytest.approx(float(want[1234]), abs=1e-5)  # exact by index


def test_install_refuses_another_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    refuses_to_install(fast_logprobs, "0", monkeypatch)


@pytest.fixture(scope="module")
def llama():  # noqa: ANN201
    from tests.support.llama import in_process_llama

    model = in_process_llama(n_ctx=1024)
    yield model
    model.close()


def _top(llama, top_logprobs: int) -> list[tuple[str, float, dict[str, float]]]:  # noqa: ANN001
    messages = [{"role": "user", "content": "TEXT: The council voted 7 to 4 to close the bridge.\n"
                                            "Does the TEXT give the result of the vote? Answer Yes or No."}]
    # A short unrelated prompt first, so both ways evaluate the measured prompt from the same state
    # (a prompt evaluated whole and one mostly reused from the cache differ in their last digits).
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    reply = llama.create_chat_completion(messages=messages, max_tokens=2, temperature=0.0, logprobs=True,
                                         top_logprobs=top_logprobs)
    return [(c["token"], c["logprob"], {t["token"]: t["logprob"] for t in c["top_logprobs"]})
            for c in reply["choices"][0]["logprobs"]["content"]]


@pytest.mark.real_model
def test_the_servers_log_probabilities_are_the_librarys_own(
        llama, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from llama_cpp import Llama

    own = _top(llama, 20)
    monkeypatch.setattr(Llama, "logits_to_logprobs", Llama.__dict__["logits_to_logprobs"])  # put back after
    monkeypatch.setattr(Llama, "_create_completion", Llama._create_completion)
    fast_logprobs.install({})
    ours = _top(llama, 20)
    assert [t for t, _, _ in ours] == [t for t, _, _ in own]
    for (_, lp_own, top_own), (_, lp_ours, top_ours) in zip(own, ours, strict=True):
        assert lp_ours == pytest.approx(lp_own, abs=1e-4)
        assert list(top_ours) == list(top_own)
        assert list(top_ours.values()) == pytest.approx(list(top_own.values()), abs=1e-4)
    yes = sum(math.exp(lp) for t, lp in ours[0][2].items() if t.strip().lower() == "yes")
    assert yes > 0.5  # the model reads a stated vote as given
    many = _top(llama, fast_logprobs.TOP + 6)  # more than it keeps: the library's own code, every one real
    assert len(many[0][2]) >= fast_logprobs.TOP + 6 and all(math.isfinite(v) for v in many[0][2].values())
