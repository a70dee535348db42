"""The output contract of generated prose (issue 13, item 3): junk with 200 OK is repaired,
never cached or stored; a summary keeps 0.5x-1.5x of its target; a refusal from the summarizer
is a failure to retry, one from a model under test is its answer, kept and flagged."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ParseError
from pipeline.llm.client import LLMClient
from pipeline.llm.contract import is_refusal, prose_problem
from pipeline.stages.generation import respond, summarize
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message
from tests.fakes.prose import prose
from tests.support.generation import generation_config, setup_instruction

RESPONSE = " ".join(["The harbour festival drew crowds to the quay at dawn."] * 20)  # 200 words
JUNK = "%%%garbage%%% ### @@@ 0x00 ~~~"
REFUSAL = "I'm sorry, but I can't help with that request."


@pytest.mark.parametrize("text", [
    "I'm sorry, but I can't help with that.",
    "I am sorry, I cannot write this article.",
    "Sorry, I can't assist with that request.",
    "I cannot help with creating this content.",
    "As an AI language model, I am unable to fulfil this request.",
    "Unfortunately, I won't be able to do that.",
])
def test_refusals_are_recognised(text):
    assert is_refusal(text)


@pytest.mark.parametrize("text", [
    RESPONSE,
    "The mayor said: I'm sorry, but I can't fund the bridge. "
    + " ".join(["The council argued for hours."] * 30),
    "Sorry state of the harbour: the quay is crumbling and the town cannot agree on repairs.",
])
def test_answers_are_not_refusals(text):
    assert not is_refusal(text)


@pytest.mark.parametrize(("text", "problem"), [
    (JUNK, "not prose"), ('{"summary": "the harbour"}', "JSON"),
    ("<html><body>502</body></html>", "markup"), ("", "empty"),
])
def test_junk_is_not_prose(text, problem):
    assert problem in (prose_problem(text) or "")


def test_prose_is_prose():
    assert prose_problem(RESPONSE) is None
    assert prose_problem("In 2019, 3 of 12 boats (25%) sank off the quay; the town rebuilt.") is None


async def _response(store, server):
    server.push(RESPONSE)
    client = LLMClient(generation_config(server), store)
    gid, _ = await respond(store, client, 1, "m", "direct", words=200)
    return client, gid


async def _summary_asked_again(store, bad: str) -> list[dict[str, str]]:  # noqa: ANN001
    """The summarizer answers ``bad``, then a good summary: the good one is stored, ``bad`` never
    cached. The messages of the second summary request."""
    setup_instruction(store)
    good = prose(48, 3)
    with FakeOpenAIServer() as server:
        client, gid = await _response(store, server)
        server.push(bad, good)
        sid, _ = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
    assert store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?", [sid])) == good
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [bad]) == 0
    return server.requests[2]["messages"]


@pytest.mark.parametrize("bad", [prose(5, 3), prose(90, 1)], ids=["5 words for 50", "90 words for 50"])
async def test_a_summary_of_the_wrong_length_is_asked_again_as_shorten_and_never_cached(store, bad):
    again = await _summary_asked_again(store, bad)
    assert "Shorten it to 50 words" in again[-1]["content"] and bad not in [m["content"] for m in again]


@pytest.mark.parametrize("bad", [JUNK, REFUSAL], ids=["junk", "refusal"])
async def test_a_junk_summary_is_asked_again_with_the_reply_quoted_and_never_cached(store, bad):
    """Junk is an endpoint in trouble, not a length the model cannot keep: the same prompt again,
    the reply quoted (a repair round), not the next prompt of the chain."""
    again = await _summary_asked_again(store, bad)
    assert "Summarise it in about 50 words" in again[1]["content"] and again[-2] == {"role": "assistant",
                                                                                     "content": bad}
    assert "cannot be used" in again[-1]["content"]


async def test_a_summary_bad_twice_fails_and_leaves_nothing_behind(store):
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        client, gid = await _response(store, server)
        server.push(JUNK, JUNK, JUNK, JUNK)  # asked to summarise, then to shorten, each with its repair round
        with pytest.raises(ParseError) as caught:
            await summarize(store, client, gid, 0.25, "s")
        assert server.calls == 5
        # The next run asks again (nothing cached) and takes a good one.
        server.push(prose(50, 3))
        sid, created = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
    assert "no usable summary" in caught.value.msg and "not prose" in caught.value.msg
    assert created and store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary'") == 1
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [JUNK]) == 0
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'response'") == 1  # the response kept


async def test_a_refusal_from_a_model_under_test_is_kept_and_flagged(store):
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        server.push(REFUSAL, RESPONSE)
        client = LLMClient(generation_config(server), store)
        refused, _ = await respond(store, client, 1, "m", "direct", words=200)
        answered, _ = await respond(store, client, 1, "m", "edit", words=200)
        await client.aclose()
        assert server.calls == 2  # no repair round: the refusal is the answer
    flags = {r["id"]: r["refusal"]
             for r in store.query("SELECT id, refusal FROM generations WHERE kind = 'response'")}
    assert flags == {refused: 1, answered: 0}


async def test_junk_from_a_model_under_test_is_repaired(store):
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        server.push(Reply(text=JUNK), RESPONSE)
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=200)
        await client.aclose()
        assert "cannot be used" in last_user_message(server.requests[1])
    assert store.scalar("SELECT refusal FROM generations WHERE id = ?", [gid]) == 0
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [JUNK]) == 0


async def _summary_of_a_response(store, response: str, summary: str, ratio: float):  # noqa: ANN202
    """A response stored as given, then summarised at ``ratio`` with ``summary`` as the first
    reply: (server, response id, created)."""
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        server.push(response)
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=200)
        server.push(summary)
        _sid, created = await summarize(store, client, gid, ratio, "s")
        await client.aclose()
    return server, gid, created


async def test_the_summary_of_a_refusing_response_may_read_as_a_refusal(store):
    """Summarising a refusal faithfully gives a refusal: accepted then, or the unit could never finish."""
    server, gid, created = await _summary_of_a_response(
        store, REFUSAL, "I'm sorry, but I can't help with that request at all.", 0.5)
    assert server.calls == 2  # no repair round
    assert created and store.scalar("SELECT refusal FROM generations WHERE id = ?", [gid]) == 1


def test_a_length_band_is_never_narrower_than_its_floor() -> None:
    from pipeline.llm.client import ReplyError
    from pipeline.llm.contract import check_length

    assert check_length("w " * 19, 9, 0.5, what="summary", at_least=10)  # 9 +- 10: 1 to 19
    with pytest.raises(ReplyError, match=r"has 20 words; about 9 were asked for \(1 to 19 accepted\)"):
        check_length("w " * 20, 9, 0.5, what="summary", at_least=10)
    with pytest.raises(ReplyError, match=r"\(4 to 14 accepted\)"):  # no floor: 0.5x-1.5x
        check_length("w " * 19, 9, 0.5, what="summary")
    with pytest.raises(ReplyError, match=r"\(27 to 81 accepted\)"):  # a long target keeps its ratio
        check_length("w " * 90, 54, 0.5, what="summary", at_least=10)


async def test_a_short_refusal_gets_a_summary_within_ten_words_of_its_target(store):
    """Run M: the embedded model refused in 35 words; its 19-word summary (target 10) was refused
    twice under the 0.5x-1.5x band, and the instruction could not be audited."""
    refusal = ("I'm sorry, but I cannot fulfill this request as it is not clear what specific "
               "news article you are "
               "looking for. Please provide more details or specify the company and industry "
               "you are interested in.")
    server, _gid, created = await _summary_of_a_response(
        store, refusal,
        "The text declines the request because the article wanted is unclear and asks "
        "which company is meant.", 0.25)
    assert created and server.calls == 2  # accepted at once
    assert "about 10 words" in last_user_message(server.requests[1])
