"""A long response's summary section by section, the sections written together: on a summarizer
with ``batch_generation`` (the embedded server) up to 8 sections go as one list of ChatML prompts,
each the prompt its own call sends; the stored summary is the one a call a section gives. A section
whose reply in the list is junk is asked alone; an endpoint that refuses lists is asked one section
a call (the fake server answers each prompt of a list as the same chat)."""

from __future__ import annotations

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import ParseError
from pipeline.llm.client import LLMClient
from pipeline.stages.generation import respond, summarize
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer, last_user_message
from tests.fakes.prose import prose
from tests.support.generation import setup_instruction

PARAGRAPHS = 10  # a 1,000-word response: 10 sections, so one list of 8 and one of 2


def _terse(request: dict) -> str:
    """Writes 10 paragraphs of 100 words; a summary is never over 52 words, so the whole (250 asked)
    and its shortening miss, and each section (25 asked) is summarised in 25 words."""
    prompt = last_user_message(request)
    if "Summarise it in about" in prompt or "Shorten it to" in prompt:
        target = int(prompt.split(" about ")[1].split()[0]) if "about" in prompt else 52
        return prose(min(target, 52), 3)
    return "\n\n".join(f"point{p} " + prose(99, p, one_sentence=True) for p in range(PARAGRAPHS))


def _junk_in_a_list(request: dict) -> str:
    """As _terse, but the third section's reply is junk when it comes in a list."""
    if "list_index" in request and request["list_index"] == 2:
        return "I cannot help with that."
    return _terse(request)


def _config(base_url: str, together: bool):  # noqa: ANN202
    ep = {"base_url": base_url, "concurrency": 2, "max_retries": 0}
    return parse_config({"endpoints": {"m": {**ep, "model": "writer"},
                                       "s": {**ep, "model": "summ", "batch_generation": together}},
                         "roles": {"models_under_test": ["m"], "summarizer": "s"}})


async def _summarised(tmp_path, responder, *, together: bool, lists: bool = True):  # noqa: ANN001, ANN202
    """(the stored summary, the requests sent, the client's events)."""
    store = open_store(tmp_path / f"{together}-{lists}-{responder.__name__}.sqlite")
    setup_instruction(store)
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(responder) as server:
        server.prompt_lists = lists
        client = LLMClient(_config(server.base_url, together), store,
                           on_event=lambda k, d: events.append((k, d)))
        gid, _ = await respond(store, client, 1, "m", "direct", words=1500)  # no cut
        sid, created = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
    assert created
    body = store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?", [sid]))
    return body, server.requests, events


def _section_requests(requests: list[dict]) -> list[int]:
    """How many sections each section request carried (1 for a chat)."""
    return [len(r["prompt"]) if isinstance(r.get("prompt"), list) else 1 for r in requests
            if "about 25 words" in (r["prompt"][0] if isinstance(r.get("prompt"), list)
                                    else last_user_message(r))]


async def test_sections_written_together_give_the_summary_of_a_call_a_section(tmp_path):
    alone, alone_asked, _ = await _summarised(tmp_path, _terse, together=False)
    together, together_asked, _ = await _summarised(tmp_path, _terse, together=True)
    assert _section_requests(alone_asked) == [1] * PARAGRAPHS
    assert _section_requests(together_asked) == [8, 2]  # at most 8 prompts a list
    assert together == alone and len(together.split("\n\n")) == PARAGRAPHS


async def test_a_section_with_junk_in_the_list_is_asked_alone(tmp_path):
    alone, _, _ = await _summarised(tmp_path, _terse, together=False)
    together, asked, _ = await _summarised(tmp_path, _junk_in_a_list, together=True)
    assert _section_requests(asked) == [8, 2, 1]  # both lists, then the junk section alone
    assert "cannot help" not in together and together == alone


async def test_an_endpoint_that_refuses_lists_is_asked_a_section_a_call(tmp_path):
    alone, _, _ = await _summarised(tmp_path, _terse, together=False)
    refused, asked, events = await _summarised(tmp_path, _terse, together=True, lists=False)
    assert _section_requests(asked) == [8] + [1] * PARAGRAPHS  # refused once, then never a list again
    assert refused == alone
    assert sum("list" in detail for kind, detail in events if kind == "notice") == 1


def _long_sections_writer(section_words: int, shortened_words: int):  # noqa: ANN202
    """SmolLM2's 280-word response in 5 paragraphs (target 70 words, band 35 to 105), summarised by a
    model that hands the whole back (whole and shortened), writes ``section_words`` a section, and
    shortens the sections' joined summary to ``shortened_words``."""
    def reply(request: dict) -> str:
        prompt = last_user_message(request)
        if "Summarise it in about 70 words" in prompt or "has 280 words. Shorten" in prompt:
            return prose(277, 3)
        if "Summarise it in about" in prompt:
            return prose(section_words, 4)
        if "Shorten it to 70 words" in prompt:
            return prose(shortened_words, 5)
        return "\n\n".join(f"point{p} " + prose(55, p, one_sentence=True) for p in range(5))
    return reply


@pytest.mark.parametrize(("section_words", "shortened_words", "stored"),
                         [(27, 60, 60), (27, 130, 130), (40, 150, None)])
async def test_the_sections_joined_too_long_are_shortened_or_the_nearest_kept(tmp_path, section_words,
                                                                              shortened_words, stored):
    """Joined, the sections' summaries (5 x 27 = 135 words) miss the band: shortened as a whole to 60
    they are kept; to 130 (within the band again, up to 140) that nearest one is kept and said; 5 x 40
    = 200 shortened to 150, the nearest misses by more: nothing is stored."""
    store = open_store(tmp_path / "s.sqlite")
    setup_instruction(store)
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(_long_sections_writer(section_words, shortened_words)) as server:
        client = LLMClient(_config(server.base_url, True), store, on_event=lambda k, d: events.append((k, d)))
        gid, _ = await respond(store, client, 1, "m", "direct", words=280)
        if stored is None:
            with pytest.raises(ParseError, match="no usable summary, whole or by section: .* 200 words"):
                await summarize(store, client, gid, 0.25, "s")
        else:
            await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
    asked = [last_user_message(r) for r in server.requests if not isinstance(r.get("prompt"), list)]
    assert sum(f"has {5 * section_words} words. Shorten it to 70 words" in a for a in asked) == 1
    words = [r["words"] for r in store.query("SELECT words FROM generations WHERE kind = 'summary'")]
    assert words == ([stored] if stored else [])
    notices = [d for k, d in events if k == "notice" and "kept the nearest summary" in d]
    assert len(notices) == (1 if stored == 130 else 0)
