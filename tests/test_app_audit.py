"""Audit screen: highlighted spans on a store with known overlaps, quotes, lineage, keys."""

from __future__ import annotations

from tests.support.app import (
    C1,
    C2,
    QUOTE_1,
    RESPONSE,
    SUMMARY,
    A,
    B,
    make_known_store,
    on_screen,
    settle,
    synthetic_app,
    text_of,
    textual_private,
)
from unspecific_tui.app import UnspecificApp


def span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return (start, start + len(part))


async def open_audit(tmp_path, size=(160, 48)):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={}, annotator="ann")
    return known, app


async def test_copied_ngrams_and_quotes_highlighted(tmp_path):
    known, app = await open_audit(tmp_path)
    async with on_screen(app, "3", (160, 48)):
        screen = app.screen
        shown = screen.shown
        assert shown.constraint_id == known.c1 and shown.writer == ("m1", "direct")
        # "flood defence plan" copied from C1 into each text; in B the run also takes "The".
        assert shown.copies["ref-a"] == (span(A, "flood defence plan"),)
        assert shown.copies["ref-b"] == (span(B, "The flood defence plan"),)
        assert shown.copies["response"] == (span(RESPONSE, "flood defence plan"),)
        assert shown.copies["summary"] == (span(SUMMARY, "flood defence plan"),)
        # judge-a's quote sits in the response; judge-b's quote is nowhere in it.
        assert dict(shown.quotes["response"]) == {"judge-a": span(RESPONSE, QUOTE_1), "judge-b": None}
        assert dict(shown.quotes["summary"])["judge-a"] == span(SUMMARY, "a flood defence plan")
        # The pane really carries those styles.
        pane = screen.query_one("#response")
        assert span(RESPONSE, QUOTE_1) in pane.spans
        verdicts = text_of(screen.query_one("#audit-verdicts"))
        assert "MISSING" in verdicts and "found" in verdicts
        assert C1 in text_of(screen.query_one("#audit-head"))


async def test_reference_copy_mode(tmp_path):
    known, app = await open_audit(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "c")
        await pilot.pause()
        shown = app.screen.shown
        # Response vs references, runs of >= 5 words: the response copies two passages of A.
        # ("at a packed meeting" is shared too, but only 4 words long.)
        assert shown.copies["response"] == (span(RESPONSE, "a flood defence plan for the river district"),)
        # Which reference each copied passage comes from: that run is in A only.
        assert shown.sources["response"] == {"A": shown.copies["response"], "B": ()}
        assert "from A 1 · from B 0" in app.screen.query_one("#response").border_subtitle
        assert span(A, "a flood defence plan for the river district") in shown.copies["ref-a"]
        await pilot.press("c")
        await pilot.pause()
        assert app.screen.shown.copies["ref-a"] == (span(A, "flood defence plan"),)


async def test_keys_move_flag_flip_and_lineage(tmp_path):
    known, app = await open_audit(tmp_path)
    async with on_screen(app, "3", (160, 48)) as pilot:
        screen = app.screen
        await pilot.press("j")
        await pilot.pause()
        assert screen.shown.constraint_id == known.c2
        head = text_of(screen.query_one("#audit-head"))
        assert "replaced #2" in head and "too easy" in head and "FLIPPED" in head
        await pilot.press("k")
        await pilot.pause()
        assert screen.shown.constraint_id == known.c1
        await pilot.press("f")  # asks which flag: the proper-noun flag (on C3) is the only one
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.shown.constraint_id == known.c3
        assert "proper_noun" in text_of(screen.query_one("#audit-head"))
        await pilot.press("x")  # the only flipped one for m1 is C2
        await pilot.pause()
        assert screen.shown.constraint_id == known.c2
        await pilot.press("m")
        await pilot.pause()
        assert screen.shown.writer == ("m2", "direct")


async def test_flipped_before_analysis_is_ready(tmp_path):
    """`x` works from per-constraint queries while the store-wide pass has not finished."""
    known, app = await open_audit(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.analysis = None
        await pilot.press("3", "x")
        await pilot.pause()
        assert app.screen.shown.constraint_id == known.c2


async def test_narrow_terminal_shows_one_pane_and_cycles(tmp_path):
    known, app = await open_audit(tmp_path)
    async with on_screen(app, "3", (80, 24)) as pilot:
        screen = app.screen
        assert screen.has_class("-narrow")
        visible = [p.id for p in screen.query("TextPane") if p.display and p.styles.display != "none"]
        assert visible == ["ref-a"]
        await pilot.press("t", "t")
        await pilot.pause()
        visible = [p.id for p in screen.query("TextPane") if p.styles.display != "none"]
        assert visible == ["response"]


async def test_similarity_is_the_stored_one_else_lexical_labelled(tmp_path):
    from pipeline.analysis.copying import lexical_overlap
    from pipeline.store.database import open_store
    from pipeline.store.similarity import SimilarityRow, put_similarities

    known, app = await open_audit(tmp_path)
    store = open_store(app.store_path)
    put_similarities(store, [SimilarityRow(known.c1, known.instruction, "mpnet", 0.73, 0.41)])
    store.commit()
    store.close()
    async with on_screen(app, "3", (160, 48)) as pilot:
        screen = app.screen
        assert screen.shown.similarities == {"ref-a": ("mpnet", 0.73), "ref-b": ("mpnet", 0.41)}
        assert "sim 0.73 (mpnet)" in screen.query_one("#ref-a").border_subtitle
        head = text_of(screen.query_one("#audit-head"))
        assert "similarity (mpnet)" in head and "0.73" in head and "0.41" in head
        await pilot.press("j")  # C2 has no stored value: the lexical stand-in, labelled as such
        await pilot.pause()
        assert screen.shown.similarities["ref-b"] == ("lexical", lexical_overlap(C2, B))
        assert "not stored" in screen.query_one("#ref-b").border_subtitle
        assert "similarity (lexical, none stored)" in text_of(screen.query_one("#audit-head"))


async def test_instruction_jumps(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=5)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "j", "right_square_bracket")
        await pilot.pause()
        screen = app.screen
        assert screen.shown.instruction_id == 2 and screen.place.index == 5
        await pilot.press("right_square_bracket", "right_square_bracket")  # stays on the last
        await pilot.pause()
        assert screen.shown.instruction_id == 3 and screen.place.index == 10
        await pilot.press("j", "j", "left_square_bracket")
        await pilot.pause()
        assert screen.shown.instruction_id == 2 and screen.place.index == 5


async def test_80x24_is_one_pane_of_ten_lines_and_the_list_behind_l(tmp_path):
    """At 80x24 the detail is one text pane with at least 10 lines of text (the list does not share
    the height); `l` puts the list in its place, enter on a row comes back to that row's text."""
    from unspecific_tui.widgets.constraint_list import ConstraintList

    known, app = await open_audit(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("3")
        await settle(app, pilot)
        screen = app.screen
        pane = screen.query_one("#ref-a")
        assert pane.display and pane.scrollable_content_region.height >= 10
        table = screen.query_one(ConstraintList)
        assert not table.region.height  # the list is behind `l`
        await pilot.press("l")
        await pilot.pause()
        assert table.has_focus and table.region.height >= 10 and not pane.region.height
        await pilot.press("down", "enter")
        await pilot.pause()
        assert not table.region.height and pane.scrollable_content_region.height >= 10
        assert screen.shown.constraint_id == known.c2
        # The one pane keeps its whole border, focused or not: its title says which pane it is, its
        # footer (its words, what was copied into it) is in the bottom border.
        for focused in (False, True):
            if focused:
                pane.focus()
                await pilot.pause()
            assert pane.has_focus is focused and pane.styles.border_bottom[0] == "round"
            assert pane.border_title.startswith("Reference A (1/4") and "words" in pane.border_subtitle
            assert pane.scrollable_content_region.height >= 10
        await pilot.press("t", "t")
        await settle(app, pilot)
        response = screen.query_one("#response")
        assert response.display and "words" in response.border_subtitle
        assert response.border_title.startswith("Response (3/4")


async def test_a_key_says_what_it_changed_on_the_header_row(tmp_path):
    """Sort, filter and copy mode say so in a notice on the header's row: over no pane, verdict or
    list, and the legend keeps its caption whole (the message pushed it off the line before)."""
    Toast = textual_private("textual.widgets._toast", "Toast")

    known, app = await open_audit(tmp_path)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("3")
        await settle(app, pilot)
        legend = text_of(app.screen.query_one("#audit-legend"))
        await pilot.press("s")
        await pilot.pause(0.1)
        assert any("list sorted by suspicion" in n.message for n in app._notifications)
        toast = app.screen.query_one(Toast)
        assert (toast.region.y, toast.region.height) == (0, 1)  # the header's row
        assert text_of(app.screen.query_one("#audit-legend")) == legend


async def test_a_yes_no_verdict_shows_p_yes_uncertain_near_its_threshold_and_a_located_sentence(tmp_path):
    """A verdict read from P(Yes): its probability beside the threshold it was read at, '?' when near
    it, and a Yes resting on a located sentence (not a quote the judge wrote)."""
    from pipeline.store.database import open_store
    from pipeline.store.judge_checks import Calibration, put_calibration

    known = make_known_store(tmp_path / "s.sqlite")
    store = open_store(known.path)
    store.conn.execute("UPDATE verdicts SET judging_mode = 'yes_no', p_yes = 0.66, quote_found = "
                       "'located', reason = NULL"
                       " WHERE judge = 'judge-a' AND verdict = 1")
    store.conn.execute("UPDATE verdicts SET judging_mode = 'yes_no', p_yes = 0.02 WHERE judge = "
                       "'judge-a' AND verdict = 0")
    store.commit()
    put_calibration(store, Calibration("judge-a", "yes_no", "builtin", 0.6, "youden", 205, 0.9, 0.85))
    store.close()
    app = UnspecificApp(known.path, stages={}, annotator="ann")
    async with on_screen(app, "3", (160, 48)):
        lines = text_of(app.screen.query_one("#audit-verdicts")).splitlines()
    mine = [line for line in lines if line.startswith("judge-a")]
    said_yes = [line for line in mine if " yes? " in line]
    assert said_yes and all("located" in line and "P(Yes) 0.66 vs 0.60, uncertain" in line
                            for line in said_yes)
    assert not any("MISSING" in line for line in mine)
