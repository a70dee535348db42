"""Responses (direct and edit) and summaries against the fake server."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ParseError, StageError
from pipeline.core.text import count_words
from pipeline.llm.client import LLMClient
from pipeline.stages.generation import cut_at_last_sentence, respond, response_budget, summarize
from pipeline.store.database import now
from tests.fakes.fake_server import FakeOpenAIServer, last_user_message
from tests.fakes.prose import prose
from tests.support.generation import BASE, generation_config, no_summary, setup_instruction


def _writer(request: dict) -> str:
    prompt = last_user_message(request)
    if "Summarise it in about" in prompt:
        target = int(prompt.split("Summarise it in about ")[1].split()[0])
        return "Here is the summary:\n" + prose(target, 3)
    return "```\n" + prose(200) + "\n```"


async def test_direct_response_and_summary(store):
    setup_instruction(store)
    with FakeOpenAIServer(_writer) as server:
        client = LLMClient(generation_config(server), store)
        gid, created = await respond(store, client, 1, "m", "direct", words=200)
        prompt = last_user_message(server.requests[0])
        assert created and "harbour festival" in prompt and BASE not in prompt
        assert "1. Open with the weather." in prompt and "3. End with the tide." in prompt
        assert "Mention the mayor" not in prompt  # inactive constraints stay out
        assert "about 200 words" in prompt
        sid, created = await summarize(store, client, gid, 0.25, "s")
        assert created and "about 50 words" in last_user_message(server.requests[1])
        assert "The text has 200 words" in last_user_message(server.requests[1])
        # Stored ones are found again: no call.
        assert (await respond(store, client, 1, "m", "direct", words=200)) == (gid, False)
        assert (await summarize(store, client, gid, 0.25, "s")) == (sid, False)
        await client.aclose()
        assert server.calls == 2
    response = store.one("SELECT * FROM generations WHERE id = ?", [gid])
    assert response["kind"] == "response" and response["model"] == "m" and response["mode"] == "direct"
    assert response["words"] == 200 and response["ratio"] is None and response["call_id"] is not None
    assert store.get_text(response["text_hash"]) == prose(200)  # fence stripped
    summary = store.one("SELECT * FROM generations WHERE id = ?", [sid])
    assert summary["kind"] == "summary" and summary["parent_id"] == gid and summary["ratio"] == 0.25
    assert summary["words"] == 50 and summary["achieved_ratio"] == pytest.approx(0.25)
    assert store.get_text(summary["text_hash"]).startswith(prose(3, 3).rstrip("."))  # preamble stripped


async def test_achieved_ratio_is_measured_not_assumed(store):
    setup_instruction(store)
    with FakeOpenAIServer(_writer) as server:
        server.push(prose(120), prose(9, 3))  # a summary far shorter than asked
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=120)
        sid, _ = await summarize(store, client, gid, 0.5, "s", slack=None)  # any length: measured as it is
        await client.aclose()
    assert "about 60 words" in last_user_message(server.requests[1])
    assert store.scalar("SELECT achieved_ratio FROM generations WHERE id = ?",
                        [sid]) == pytest.approx(9 / 120, abs=1e-4)


async def test_edit_mode_prompt_carries_the_base_article(store):
    setup_instruction(store)
    with FakeOpenAIServer(_writer) as server:
        client = LLMClient(generation_config(server), store)
        direct, _ = await respond(store, client, 1, "m", "direct", words=200)
        edit, created = await respond(store, client, 1, "m", "edit", words=200)
        await client.aclose()
        prompt = last_user_message(server.requests[1])
    assert created and edit != direct
    assert BASE in prompt and "<<<DRAFT" in prompt and "2. Quote a fisherman." in prompt
    assert store.scalar("SELECT mode FROM generations WHERE id = ?", [edit]) == "edit"


async def test_edit_mode_without_base_article_is_a_stage_error(store):
    setup_instruction(store, with_base=False)
    with FakeOpenAIServer(_writer) as server:
        client = LLMClient(generation_config(server), store)
        with pytest.raises(StageError, match="no base article"):
            await respond(store, client, 1, "m", "edit")
        await client.aclose()
        assert server.calls == 0


async def test_empty_text_reply_is_refused_and_not_stored(store):
    setup_instruction(store)
    with FakeOpenAIServer(_writer) as server:
        server.push("```\n```", "```\n```")  # the ask and its repair round
        client = LLMClient(generation_config(server), store)
        with pytest.raises(ParseError, match="no usable response"):
            await respond(store, client, 1, "m", "direct")
        gid, created = await respond(store, client, 1, "m",
                                     "direct")  # the next reply is fine, no cache of the bad one
        await client.aclose()
    assert created and store.scalar("SELECT count(*) FROM generations WHERE kind = 'response'") == 1


async def test_edit_mode_borrows_the_pair_base_article(store):
    """The build writes the base article for the eval condition; a direct-condition instruction of
    the same run and pair (same main task) is edited from it."""
    setup_instruction(store)
    store.conn.execute("UPDATE instructions SET article_a = 5, article_b = 6 WHERE id = 1")
    store.db["instructions"].insert({"id": 2, "run_id": "b", "domain": "news",
                                     "condition": "direct", "article_a": 5,
                                     "article_b": 6,
                                     "main_task": "Write a news article about a harbour festival.",
                                     "n_constraints": 1, "status": "done", "created_at": now()})
    store.db["constraints"].insert({"instruction_id": 2, "position": 1, "text": "Quote a sailor.",
                                    "origin": "revised",
                                    "active": 1})
    store.commit()
    with FakeOpenAIServer(_writer) as server:
        client = LLMClient(generation_config(server), store)
        await respond(store, client, 2, "m", "edit", words=200)
        await client.aclose()
        assert BASE in last_user_message(server.requests[0])


async def test_a_response_stopped_by_its_budget_ends_at_its_last_full_sentence(store):
    """A reply that used its whole token budget stopped mid-sentence: stored up to its last sentence end.
    A reply within the budget is kept as written, even without a final full stop."""
    setup_instruction(store)
    looping = prose(60) + " The market was up and the"  # the fake counts a token per 4 characters
    with FakeOpenAIServer(_writer) as server:
        server.push(looping, "A short reply with no full stop at its end")
        client = LLMClient(generation_config(server), store)
        cut, _ = await respond(store, client, 1, "m", "direct", words=20)
        kept, _ = await respond(store, client, 1, "m", "edit", words=20)
        await client.aclose()
    assert server.requests[0]["max_tokens"] == response_budget(20) < len(looping) // 4
    assert store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?", [cut])) == prose(60)
    assert store.scalar("SELECT words FROM generations WHERE id = ?", [cut]) == 60
    assert store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?",
                                       [kept])).endswith("its end")


def test_cut_at_last_sentence_keeps_decimals_quotes_and_texts_with_no_end():
    assert cut_at_last_sentence("Sales rose. Costs fell! The") == "Sales rose. Costs fell!"
    assert cut_at_last_sentence('He said "go." Then he') == 'He said "go."'
    assert cut_at_last_sentence("Pi is 3.14 and so") == "Pi is 3.14 and so"
    assert cut_at_last_sentence("Short. Then a long run of words with no end at all for ever") == \
        "Short. Then a long run of words with no end at all for ever"  # the end is in its first half


def test_count_words():
    assert count_words("one  two\nthree") == 3


async def test_a_long_summary_is_asked_once_to_shorten_it(store):
    setup_instruction(store)
    with FakeOpenAIServer(_writer) as server:
        # response of 200 words; summary at 0.25 (target 50): 120 words, then 55 when asked to shorten it.
        server.push(prose(200), prose(120, 1), prose(55, 3))
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=200)
        sid, _ = await summarize(store, client, gid, 0.25, "s")
        # Within the slack: no second request.
        server.push(prose(70, 2))
        sid2, _ = await summarize(store, client, gid, 0.3, "s")
        # slack=None: never shortened.
        server.push(prose(150, 1))
        sid3, _ = await summarize(store, client, gid, 0.1, "s", slack=None)
        await client.aclose()
        assert server.calls == 5
        follow_up = server.requests[2]["messages"]
        assert ([m["role"] for m in follow_up] == ["system", "user"]
                and "Shorten it to 50 words" in follow_up[-1]["content"])
    words = {r["id"]: (r["words"], r["achieved_ratio"]) for r in store.query("SELECT * FROM generations")}
    assert words[sid] == (55, pytest.approx(0.275)) and words[sid2][0] == 70 and words[sid3][0] == 150


def _terse_writer(request: dict) -> str:
    """A small model: writes long responses, but never more than 52 words of summary."""
    prompt = last_user_message(request)
    if "Summarise it in about" in prompt:
        target = int(prompt.split("Summarise it in about ")[1].split()[0])
        return prose(min(target, 52), 3)
    paragraphs = [prose(100, p, one_sentence=True) for p in range(8)]  # 800 words, 8 paragraphs
    return "\n\n".join(paragraphs)


async def test_a_model_that_cannot_write_a_long_summary_summarises_section_by_section(store):
    setup_instruction(store)
    with FakeOpenAIServer(_terse_writer) as server:
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=800)
        sid, _ = await summarize(store, client, gid, 0.25, "s")
        calls = server.calls
        again, created = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
        asked = [last_user_message(r) for r in server.requests
                 if "Summarise it in about" in last_user_message(r)]
    # The whole text asked for 200 words (52), asked to shorten it (the same), then 8 sections (a
    # paragraph of one 100-word sentence each: a sentence is never cut), 25 words each.
    assert sum("about 200 words" in a for a in asked) == 1 and sum("about 25 words" in a for a in asked) == 8
    row = store.one("SELECT words, achieved_ratio FROM generations WHERE id = ?", [sid])
    assert row["words"] == 200 and row["achieved_ratio"] == 0.25
    assert (again, created, server.calls) == (sid, False, calls)  # stored: nothing asked again


def _uneven_writer(request: dict) -> str:
    """Writes 800 words; a summary of the whole comes back at 30 words, and section summaries
    miss their own length both ways (10, then 40 words) but add up to the length asked."""
    prompt = last_user_message(request)
    if "Summarise it in about 200 words" in prompt or "Shorten it to" in prompt:
        return prose(30, 3)
    if "Summarise it in about" in prompt:
        _uneven_writer.sections += 1
        return prose(10 if _uneven_writer.sections % 2 else 40, 3)
    return "\n\n".join(prose(100, p, one_sentence=True) for p in range(8))


async def _summarised_by(store, writer, words: int):  # noqa: ANN001, ANN202
    """A response of about ``words`` words written by ``writer``, summarised at 0.25: (summary
    id, created, the user messages the server was sent)."""
    setup_instruction(store)
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=words)
        sid, created = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
        return sid, created, [last_user_message(r) for r in server.requests]


async def test_sections_may_miss_their_length_when_the_whole_keeps_it(store):
    _uneven_writer.sections = 0
    sid, created, _ = await _summarised_by(store, _uneven_writer, 800)
    assert created and _uneven_writer.sections == 8  # 8 sections of 100 words: 10 + 40 + 10 + 40 ...
    assert store.scalar("SELECT words FROM generations WHERE id = ?", [sid]) == 200


def _repeating_writer(request: dict) -> str:
    """The embedded model's pair 2 response, in shape: five paragraphs, then one that says them all
    again. Summaries: the whole and its shortening hand back 300 words; a section, half of it."""
    prompt = last_user_message(request)
    if "Summarise it in about" in prompt or "Shorten it to" in prompt:
        words = int(prompt.split(" has ")[1].split()[0])  # "The text (above) has N words"
        return prose(300 if words > 100 else words // 2, 3)
    paragraphs = [f"point{p} " + prose(48, p, one_sentence=True) for p in range(5)]
    return "\n\n".join(paragraphs + [" ".join(paragraphs)])  # 245 words, then the same 245 again


async def test_a_passage_said_twice_is_summarised_once(store):
    sid, created, asked = await _summarised_by(store, _repeating_writer, 500)
    sections_asked = asked[3:]  # after respond, whole, shorten
    # Whole (300 words) and shortened (300) miss 61-183 words; then the five paragraphs, once each:
    # 5 x 24 words (summarised twice, 240 words would miss it too).
    assert created and len(sections_asked) == 5
    assert [next(w for w in a.split() if w.startswith("point"))
            for a in sections_asked] == [f"point{p}" for p in range(5)]
    assert store.scalar("SELECT words FROM generations WHERE id = ?", [sid]) == 5 * 24


def test_without_repeats_drops_sentences_said_before():
    from pipeline.stages.generation import without_repeats

    text = "One thing. Two  things!\n\nThree. one THING.\n\nTwo things! One thing."
    assert without_repeats(text) == "One thing. Two  things!\n\nThree."
    assert without_repeats("Plain text. Nothing twice.") == "Plain text. Nothing twice."


def test_sections_cut_at_paragraphs_then_sentences():
    from pipeline.stages.generation import sections

    text = "\n\n".join([" ".join(["a"] * 100), " ".join(["b"] * 100), " ".join(["c"] * 100)])
    assert [count_words(s) for s in sections(text, 250)] == [200, 100]
    long_paragraph = " ".join(f"Sentence number {i} is here." for i in range(100))  # 500 words, one paragraph
    parts = sections(long_paragraph, 250)
    assert len(parts) == 2 and all(count_words(p) <= 250 for p in parts)
    assert " ".join(parts) == long_paragraph
    assert sections("short text.") == ["short text."]


def _copying_writer(shortens: bool):  # noqa: ANN202
    """The embedded model's habit: a response of 150 words, handed back whole when asked for a
    summary of it; asked to shorten it, it shortens it (``shortens``) or hands it back again."""
    def reply(request: dict) -> str:
        prompt = last_user_message(request)
        if "Shorten it to" in prompt and shortens:
            target = int(prompt.split("Shorten it to ")[1].split()[0])
            return prose(target, 3)
        return prose(150, one_sentence=True)
    return reply


async def test_a_short_text_handed_back_whole_is_asked_to_be_shortened(store):
    setup_instruction(store)
    with FakeOpenAIServer(_copying_writer(shortens=True)) as server:
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=150)
        sid, created = await summarize(store, client, gid, 0.25, "s")
        await client.aclose()
        asked = [last_user_message(r) for r in server.requests[1:]]
    # The summary asked (the text back whole), then one shorten request: no repair round between.
    assert (len(asked) == 2 and "Summarise it in about 38 words" in asked[0]
            and "Shorten it to 38 words" in asked[1])
    row = store.one("SELECT words, achieved_ratio FROM generations WHERE id = ?", [sid])
    assert created and row["words"] == 38 and row["achieved_ratio"] == pytest.approx(38 / 150, abs=1e-3)


async def test_a_short_text_handed_back_whole_every_time_stores_no_summary(store):
    setup_instruction(store)
    await no_summary(store, _copying_writer(shortens=False), words=150, ratio=0.25,
                     match="prompt summarize_shorten: .* has 150 words")


def _overshooting_writer(summary_words: int):  # noqa: ANN202
    """SmolLM2's 77-word response in one sentence (no sections to summarise one by one), and a
    summarizer that writes ``summary_words`` whatever it is asked, to summarise or to shorten."""
    def reply(request: dict) -> str:
        prompt = last_user_message(request)
        if "Summarise it in about" in prompt or "Shorten it to" in prompt:
            return prose(summary_words, 3)
        return prose(77, one_sentence=True)
    return reply


@pytest.mark.parametrize(("summary_words", "kept"), [(30, True), (27, True), (45, False)])
async def test_a_one_section_text_keeps_the_nearest_summary_near_its_band(store, summary_words, kept):
    """Target 19 words (band 9 to 29): 30 words is kept, as the demo needed (its run stopped there);
    45 is past the band again (up to 39) and nothing is stored. A kept summary is said, not silent."""
    setup_instruction(store)
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(_overshooting_writer(summary_words)) as server:
        client = LLMClient(generation_config(server), store, on_event=lambda k, d: events.append((k, d)))
        gid, _ = await respond(store, client, 1, "m", "direct", words=77)
        if not kept:
            with pytest.raises(ParseError, match="prompt summarize_shorten: .* has 45 words"):
                await summarize(store, client, gid, 0.25, "s")
        else:
            sid, created = await summarize(store, client, gid, 0.25, "s")
            assert created
        await client.aclose()
    rows = store.query("SELECT words, achieved_ratio FROM generations WHERE kind = 'summary'")
    notices = [d for k, d in events if k == "notice" and "kept the nearest summary" in d]
    if kept and summary_words > 29:
        assert [(r["words"], r["achieved_ratio"]) for r in rows] == [(30, pytest.approx(30 / 77, abs=1e-4))]
        assert len(notices) == 1 and "30 words" in notices[0]
    elif kept:  # within the band: accepted at once, no notice
        assert [r["words"] for r in rows] == [27] and not notices
    else:
        assert rows == [] and not notices
