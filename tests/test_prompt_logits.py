"""pipeline.llm.prompt_logits: the embedded server asks for a prompt's last-token logits only. Replies,
their log-probabilities and an echoed prompt's log-probabilities are the library's own (the real model,
in process, the patch on and off in turn)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.llm import prompt_logits
from tests.support.llama import refuses_to_install

MESSAGES = [{"role": "system", "content": "You write short news items."},
            {"role": "user", "content": "In one sentence: the council voted 7 to 4 to close the old bridge."}]


def test_install_refuses_another_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    refuses_to_install(prompt_logits, "0", monkeypatch)


def test_only_an_echo_with_logprobs_reads_every_prompt_row() -> None:
    assert prompt_logits.reads_every_row({"echo": True, "logprobs": 0})
    assert not prompt_logits.reads_every_row({"echo": True, "logprobs": None})
    assert not prompt_logits.reads_every_row({"echo": False, "logprobs": 5})
    assert not prompt_logits.reads_every_row({})


@pytest.fixture(scope="module")
def llama() -> Iterator[Any]:
    from tests.support.llama import in_process_llama

    model = in_process_llama(n_ctx=1024)
    yield model
    model.close()


def _fresh(llama: Any) -> None:
    llama.reset()  # nothing kept from the last request: each way evaluates the whole prompt


def _chat(llama: Any) -> tuple[str, list[dict[str, float]]]:
    _fresh(llama)
    reply = llama.create_chat_completion(messages=MESSAGES, max_tokens=12, temperature=0.0, logprobs=True,
                                         top_logprobs=5)
    content = reply["choices"][0]["logprobs"]["content"]
    return reply["choices"][0]["message"]["content"], [{t["token"]: t["logprob"] for t in c["top_logprobs"]}
                                                       for c in content]


def _echo(llama: Any) -> list[float | None]:
    _fresh(llama)
    reply = llama.create_completion("The council voted to close the bridge", max_tokens=1,
                                    echo=True, logprobs=1,
                                    temperature=0.0)
    return list(reply["choices"][0]["logprobs"]["token_logprobs"])


@pytest.mark.real_model
def test_replies_and_log_probabilities_are_the_librarys_own(llama: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_cpp import Llama

    text, tops = _chat(llama)
    echoed = _echo(llama)
    monkeypatch.setattr(Llama, "eval", Llama.eval)  # put back after the test
    monkeypatch.setattr(Llama, "_create_completion", Llama._create_completion)
    prompt_logits.install({})
    assert getattr(Llama.eval, "_last_logits", False)
    patched_text, patched_tops = _chat(llama)
    assert patched_text == text
    assert [list(t) for t in patched_tops] == [list(t) for t in tops]
    for mine, own in zip(patched_tops, tops, strict=True):
        assert list(mine.values()) == pytest.approx(list(own.values()), abs=1e-3)
    # An echoed prompt's log-probabilities read every row: the library's own eval computes them all.
    assert _echo(llama)[1:] == pytest.approx(echoed[1:], abs=1e-3)
    # Only the last row of a prompt is computed otherwise: an earlier row is left as it was.
    _fresh(llama)
    llama.scores[:, :] = 0.0
    llama.eval(llama.tokenize(b"The council voted to close the bridge"))
    assert not llama.scores[0].any() and llama.scores[llama.n_tokens - 1].any()
