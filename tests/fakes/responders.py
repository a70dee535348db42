"""A scripted model for the fake OpenAI server: reads each prompt (which template, how many
items) and answers it the way a well-behaved model would, for every stage: synthesis,
revision, the base article and its judging, responses, summaries, judges, naturalness.

Shared by the build and evaluate tests, the hardening tests and the benches (soak, crash), with a
tiny store of paired articles (``make_store``) and configs on the fake server. (The ``--dry-run``
estimator answers with pipeline.llm.placeholders, the production copy of what it needs.)

The replies are a pure function of the request, so two runs over the same store ask and
get the same things; that is what the crash bench compares. The world it answers:
- synthesis lists "Discuss <topic> from angle number i." constraints, every ``easy_every``-th
  marked "(easy)"; with ``with_flags`` the first three are a leak and two near-duplicates;
- a judge says Yes to a constraint marked "(easy)" (so eval revision replaces those), and
  to one whose "angle number N" the judged text mentions, quoting that sentence;
- a writer mentions the angle of every odd-numbered requirement, in order, so a summary (the
  first words of the text) keeps only the early ones: Core < Org.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config, parse_config
from pipeline.llm.placeholders import (
    block,
    numbered_items,
    placeholder_verdict,
    summary_of,
    user_messages,
    write_response,
)
from pipeline.llm.placeholders import prompt_kind as kind_of
from pipeline.store.database import Store, now, open_store
from tests.fakes.fake_server import Reply

ARTICLE_A = (
    "The town council of Smithfield met on Tuesday evening to argue over a budget shortfall that has left "
    "the public library closed for three weeks. Councillor Mary Dawson said the gap of two hundred thousand "
    "pounds came from rising heating costs. Residents who rely on the library for internet access told the "
    "meeting they felt abandoned. Several parents said their children had nowhere quiet "
    "to study. The council "
    "will vote next month on whether to raise local fees or cut opening hours at the swimming pool."
)
ARTICLE_B = (
    "Riverton's elected board spent Monday night debating how to close a funding hole that forced the "
    "community centre to shut its doors. Board chair Ahmed Khan blamed higher insurance premiums for the "
    "deficit. Older residents said the centre was the only place where they could meet friends during the "
    "winter. Volunteers described a petition signed by hundreds of people. A decision on raising parking "
    "charges or trimming the bus service is expected before the end of the year."
)

# A constraint that copies six words of ARTICLE_A and names its councillor: flagged twice.
# Copies seven words of ARTICLE_A and names its councillor: flagged, yet mostly its own words, so
# still a usable constraint (an item mostly copied from an article is dropped as not a constraint).
LEAKY = ("Explain what Councillor Dawson said about the gap of two hundred thousand pounds and how the town "
         "plans to respond to it.")
DUPLICATE = "Describe how residents reacted to the closure of a public service."
NEAR_DUPLICATE = "Describe how the residents reacted to the closure of the public service."


def make_store(path: Path, n_pairs: int = 1, *, domain: str = "news", rule: str = "paper") -> Store:
    """A store with ``n_pairs`` pairs of the two articles above (each pair's texts made unique)."""
    store = open_store(path)
    for i in range(n_pairs):
        ids = []
        for label, body in (("a", ARTICLE_A), ("b", ARTICLE_B)):
            text = body + f" (story {i}{label})"
            h = store.put_text(text)
            ids.append(store.db["articles"].insert({
                "corpus": "test", "domain": domain, "source_id": f"{i}{label}", "title": f"story {i}{label}",
                "text_hash": h, "words": len(text.split()), "status": "kept", "duplicate_of": None,
                "imported_at": now(),
            }).last_pk)
        store.db["pairs"].insert({
            "domain": domain, "rule": rule, "params": "{}", "article_a": ids[0], "article_b": ids[1],
            "cosine": 0.8, "rank": 1, "candidates": "[]", "created_at": now(),
        })
    store.commit()
    return store


def store_response(store: Store, text: str, constraints: list[str]) -> tuple[int, list[tuple[int, str]]]:
    """One eval instruction (id 1) with ``constraints`` and a response ``text``, for judging tests:
    the response's id and each constraint's (id, text)."""
    store.db["instructions"].insert({"id": 1, "run_id": "b", "domain": "news", "condition": "eval",
                                     "main_task": "t", "n_constraints": len(constraints), "status": "done",
                                     "created_at": now()})
    ids = [store.db["constraints"].insert({"instruction_id": 1, "position": pos, "text": constraint,
                                           "origin": "synthesized", "active": 1}).last_pk
           for pos, constraint in enumerate(constraints, 1)]
    gid = store.db["generations"].insert({"kind": "response", "instruction_id": 1, "model": "m",
                                          "mode": "direct", "text_hash": store.put_text(text),
                                          "words": len(text.split())}).last_pk
    store.commit()
    return gid, list(zip(ids, constraints, strict=True))


def fake_config(base_url: str, *, concurrency: int = 2, build: dict[str, Any] | None = None) -> Config:
    raw: dict[str, Any] = {
        "endpoints": {"fake": {"base_url": base_url, "model": "fake-model", "concurrency": concurrency,
                               "max_retries": 1, "structured": "json_object_schema"}},
        "roles": {"generator": "fake", "judges": ["fake"], "summarizer": "fake", "naturalness_judge": "fake",
                  "models_under_test": ["fake"]},
    }
    # The scripted world's constraints are deliberately flawed (a leak, near-duplicates, "angle number i"
    # templates its judge finds in no reference): the gate would refuse them, so its tests turn it on.
    raw["build"] = {"gate": False, **(build or {})}
    return parse_config(raw)


def config_toml(base_url: str, *, concurrency: int = 1) -> str:
    return f"""
[endpoints.fake]
base_url = "{base_url}"
model = "fake-model"
concurrency = {concurrency}
max_retries = 1

[roles]
generator = "fake"
judges = ["fake"]
summarizer = "fake"
naturalness_judge = "fake"
models_under_test = ["fake"]

[build]
gate = false
"""


def multi_config_toml(base_url: str, *, models: int = 2, judges: int = 2, concurrency: int = 2,
                      max_retries: int = 8,
                      timeout_s: float = 30.0, evaluate: dict[str, Any] | None = None, key_env: str
                      | None = None) -> str:
    """Every role on the fake server, with ``models`` models under test and ``judges`` judges,
    each its own endpoint (and model name): what the soak and crash benches run. ``key_env``:
    every endpoint sends the key in that environment variable."""
    names = ["gen", "summ"] + [f"m{i}" for i in range(1, models + 1)] + [f"j{i}"
                                                                         for i in range(1, judges + 1)]
    lines = []
    for n in names:
        lines += [f"[endpoints.{n}]", f'base_url = "{base_url}"', f'model = "model-{n}"',
                  f"concurrency = {concurrency}",
                  f"max_retries = {max_retries}", f"timeout_s = {timeout_s}"]
        lines += [f'api_key_env = "{key_env}"', ""] if key_env else [""]
    lines += ["[roles]", 'generator = "gen"', 'summarizer = "summ"', 'naturalness_judge = "j1"',
              "judges = [" + ", ".join(f'"j{i}"' for i in range(1, judges + 1)) + "]",
              "models_under_test = [" + ", ".join(f'"m{i}"' for i in range(1, models + 1)) + "]", "",
              "[build]", "gate = false", ""]  # the scripted world's flawed constraints (fake_config)
    if evaluate:
        lines.append("[evaluate]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in evaluate.items()]
    return "\n".join(lines) + "\n"


# -- reading a prompt ----------------------------------------------------------------------------


# Kept under their old names for the tests that import them.
_block = block
_numbered_items = numbered_items


_ANGLE = re.compile(r"angle number (\d+)\b")


def judge_verdict(constraint: str, text: str) -> dict[str, Any]:
    """The placeholder's verdict (Yes for "(easy)", or a mentioned angle, quoting its sentence), and
    one case only a scripted judge plays: a small judge's Yes that quotes the "(unshown)" constraint
    itself, not the text."""
    if "(unshown)" in constraint:
        return {"verdict": "yes", "quote": constraint.rstrip("."), "reason": ""}
    return placeholder_verdict(constraint, text)


def _verdict_line(i: int, v: dict[str, Any], *, capped: bool = False) -> str:
    """One judge_lines line; ``capped``: as under ``lines_grammar``, which stops a quote at its cap,
    mid-word (the parser then drops the cut word), and lets a No carry no reason."""
    from pipeline.stages.judging import QUOTE_CAP

    if v["verdict"] != "yes":
        return f"{i}. No" if capped else f"{i}. No - {v['reason'] or 'not there'}"
    return f'{i}. Yes - "{v["quote"][:QUOTE_CAP] if capped else v["quote"]}"'


@dataclass
class ScriptedModel:
    """Answers each template correctly unless told otherwise.

    ``short_by``: the first synthesis reply has that many constraints too few.
    ``more_short_by``: the repair round for missing items returns that many too few.
    ``always_bad``: every synthesis reply is prose with no list.
    ``easy_every``: constraints i with i % easy_every == 0 carry "(easy)", which the judge
    finds satisfied by the base article, so eval replaces exactly those.
    ``unshown_every``: constraints i with i % unshown_every == 0 (and not easy) carry
    "(unshown)": the judge says Yes quoting the constraint itself, which eval keeps.
    ``answer_repairs``: a format repair round (the client's "your previous reply could not be
    used") is answered like the original request, as a good model does; by default it gets "No.".
    """

    short_by: int = 0
    more_short_by: int = 0
    always_bad: bool = False
    easy_every: int = 3
    unshown_every: int = 0
    with_flags: bool = True
    contradict: tuple[int, int] | None = (1, 2)
    answer_repairs: bool = False
    kinds: Counter = field(default_factory=Counter)

    def __call__(self, request: dict[str, Any]) -> Reply:
        kind = kind_of(request)
        self.kinds[kind] += 1
        if kind == "unknown":
            return Reply(text="unknown prompt")
        users = user_messages(request)
        first, last = users[0], users[-1]
        if kind == "format_repair" and self.answer_repairs:
            messages = request["messages"]
            upto = next(i for i, m in enumerate(messages) if m["role"] == "user")
            return self({**request, "messages": messages[: upto + 1]})
        if kind in ("synthesize_common", "synthesize_single"):
            if self.always_bad:
                return Reply(text="I would rather write a poem about the sea.")
            n = int(re.search(r"exactly (\d+) constraints", first).group(1))
            items = self.constraints(n, common=kind == "synthesize_common")[: n - self.short_by]
            story = re.search(r"\(story (\d+)a\)", first)  # one main task per pair, so base articles differ
            task = (f"Write a news article about a local authority arguing over a budget gap "
                    f"({story.group(1) if story else '?'}).")
            return Reply(text=json.dumps({"main_task": task, "constraints": items}))
        if kind == "constraints_more":
            if self.always_bad:
                return Reply(text="Still no list, sorry.")
            k = int(re.search(r"Write EXACTLY (\d+) more", last).group(1))
            return Reply(text=json.dumps({"constraints": [f"Add further point {j} about the wider region."
                                                          for j in range(1, k + 1 - self.more_short_by)]}))
        if kind == "format_repair":
            return Reply(text="No.")
        if kind == "base_article":
            words = int(re.search(r"about (\d+) words", last).group(1))
            body = " ".join(["The council met and argued about money while residents waited."]
                            * max(1, words // 10))
            return Reply(text=body)
        if kind == "judge_batched":
            text = block(first, "TEXT")
            items = numbered_items(block(first, "CONSTRAINTS"))
            system = " ".join(str(m.get("content", "")) for m in request.get("messages", [])
                              if m.get("role") == "system")
            if "one line per constraint" in system:  # the lines format (judge_format = "lines")
                capped = bool(request.get("grammar"))  # a gbnf endpoint: what lines_grammar lets through
                lines = [_verdict_line(i, judge_verdict(c, text), capped=capped) + "\n" for i, c in items]
                return Reply(text="".join(lines) if capped else "".join(lines).rstrip("\n"))
            return Reply(text=json.dumps({"verdicts": [{"id": i, **judge_verdict(c, text)}
                                                       for i, c in items]}))
        if kind == "judge_single":
            return Reply(text=json.dumps(judge_verdict(block(first, "CONSTRAINT"), block(first, "TEXT"))))
        if kind in ("respond_direct", "respond_edit"):
            words = int(re.search(r"about (\d+) words", first).group(1))
            # Each model writes its own text for its own task, so no two responses (or summaries) are alike.
            task = first.strip().splitlines()[0].removeprefix("Task: ").rstrip(".")
            brief = hashlib.sha256(first.encode()).hexdigest()[:8]  # its own task and requirements
            opening = f"Brief {brief}: a text by {request.get('model', 'a model')} for the task: {task}."
            if kind == "respond_edit":
                opening += " " + block(first, "DRAFT").split(".")[0] + "."
            return Reply(text=write_response(numbered_items(block(first, "REQUIREMENTS")), words, opening))
        if kind in ("summarize", "summarize_shorten"):
            return Reply(text=summary_of(first))
        if kind == "naturalness":
            return Reply(text=json.dumps({"preferred": 1, "reason": "the first reads more naturally"}))
        if kind == "revise_eval":
            items = numbered_items(block(first, "TOO_EASY"))
            return Reply(text=json.dumps({"replacements": [
                {"id": i, "constraint": "Harder: "
                 + text.replace("(easy)", "with a contrast between two groups")}
                for i, text in items]}))
        if kind == "revise_direct":
            items = numbered_items(block(first, "CONSTRAINTS"))
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": "Harder: " + text}
                                                           for i, text in items]}))
        if kind == "revise_missing":
            items = numbered_items(block(last, "MISSING"))
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": "Harder again: " + t}
                                                           for i, t in items]}))
        if kind == "contradictions":
            pairs = [] if self.contradict is None else [{"a": self.contradict[0], "b": self.contradict[1],
                                                         "reason": "opposite endings"}]
            return Reply(text=json.dumps({"contradictions": pairs}))
        return Reply(text="unknown prompt")

    def constraints(self, n: int, *, common: bool) -> list[str]:
        topics = ["the causes of the shortfall", "the people affected", "the options on the table",
                  "the mood of the meeting",
                  "the timeline of events", "the role of volunteers", "the views of officials",
                  "what happens next"]
        items = []
        for i in range(1, n + 1):
            easy = " (easy)" if self.easy_every and i % self.easy_every == 0 else ""
            if not easy and self.unshown_every and i % self.unshown_every == 0:
                easy = " (unshown)"
            items.append(f"Discuss {topics[i % len(topics)]} from angle number {i}{easy}.")
        if self.with_flags and n >= 4:
            items[0], items[1], items[2] = LEAKY, DUPLICATE, NEAR_DUPLICATE
        return items


# -- auditing a finished run on the fake server ------------------------------------------------


@dataclass
class RowCount:
    """One kind of result row: how many a complete run has, how many distinct ones are stored,
    and how many extra copies of a stored one exist (duplicates)."""

    kind: str
    expected: int
    present: int
    duplicates: int

    @property
    def complete(self) -> bool:
        return self.present == self.expected and self.duplicates == 0


def audit_rows(store: Store, *, build_run: str, n_pairs: int, conditions: tuple[str, ...], n_constraints: int,
               models: int, judges: int, ratios: int = 1) -> list[RowCount]:
    """Every result row a complete build + evaluate of ``n_pairs`` pairs should have, counted in
    the store by its natural key (so a duplicate under a new id shows)."""
    q = store.scalar
    n_inst = n_pairs * len(conditions)
    marks = ",".join("?" * len(conditions))
    inst = f"SELECT id FROM instructions WHERE run_id = ? AND condition IN ({marks}) AND status = 'done'"
    params = [build_run, *conditions]
    out = [RowCount(
        "instructions", n_inst,
        q(f"SELECT count(*) FROM (SELECT DISTINCT condition, article_a, article_b FROM instructions"
          f" WHERE run_id = ? AND condition IN ({marks}) AND status = 'done')", params),
        q(f"SELECT count(*) - count(DISTINCT condition || '/' || article_a || '/' || ifnull(article_b, '-'))"
          f" FROM instructions WHERE run_id = ? AND condition IN ({marks})", params),
    )]
    out.append(RowCount(
        "active constraints", n_inst * n_constraints,
        q(f"SELECT count(*) FROM (SELECT DISTINCT instruction_id, position FROM constraints WHERE active = 1"
          f" AND instruction_id IN ({inst}))", params),
        q(f"SELECT count(*) - count(DISTINCT instruction_id || '/' || position) FROM "
          "constraints WHERE active = 1"
          f" AND instruction_id IN ({inst})", params),
    ))
    if "eval" in conditions:
        out.append(RowCount(
            "base articles", n_pairs,
            q("SELECT count(DISTINCT g.instruction_id) FROM generations g JOIN instructions i ON "
              "i.id = g.instruction_id WHERE g.kind = 'base' AND i.run_id = ?", [build_run]),
            q("SELECT count(*) - count(DISTINCT g.instruction_id) FROM generations g JOIN instructions i"
              " ON i.id = g.instruction_id WHERE g.kind = 'base' AND i.run_id = ?", [build_run]),
        ))
    gen = (f"FROM generations WHERE instruction_id IN ({inst})")
    out.append(RowCount(
        "responses", n_inst * models,
        q(f"SELECT count(*) FROM (SELECT DISTINCT instruction_id, model, mode {gen} AND kind = 'response')",
          params),
        q(f"SELECT count(*) - count(DISTINCT instruction_id || '/' || model || '/' || mode) {gen} "
          "AND kind = 'response'",
          params),
    ))
    out.append(RowCount(
        "summaries", n_inst * models * ratios,
        q(f"SELECT count(*) FROM (SELECT DISTINCT parent_id, ratio, model {gen} AND kind = 'summary')",
          params),
        q(f"SELECT count(*) - count(DISTINCT parent_id || '/' || ratio || '/' || model) {gen} "
          "AND kind = 'summary'",
          params),
    ))
    judged = (f"FROM verdicts v JOIN generations g ON g.id = v.generation_id JOIN constraints c ON "
              "c.id = v.constraint_id"
              f" WHERE g.kind IN ('response', 'summary') AND c.active = 1 AND g.instruction_id IN ({inst})")
    key = "v.generation_id || '/' || v.constraint_id || '/' || v.judge || '/' || v.judging_mode"
    # A verdict counts when the judge gave it (it carries its call and a value): a missing one
    # (NULL: the judge never answered) is asked again by the next run.
    out.append(RowCount(
        "verdicts", n_inst * models * (1 + ratios) * n_constraints * judges,
        q(f"SELECT count(DISTINCT {key}) {judged} AND v.call_id IS NOT NULL AND v.verdict IS NOT NULL",
          params),
        q(f"SELECT count(*) - count(DISTINCT {key}) {judged}", params),
    ))
    return out


def result_fingerprint(store: Store, build_run: str) -> dict[str, Any]:
    """What a run produced, keyed by natural keys rather than row ids, so two stores built by
    different runs (one killed and resumed, one not) can be compared for equality."""
    inst_key = {r["id"]: f"{r['condition']}/{r['article_a']}/{r['article_b']}" for r in store.query(
        "SELECT id, condition, article_a, article_b FROM instructions WHERE run_id = ?", [build_run])}
    out: dict[str, Any] = {"instructions": {}, "constraints": {}, "generations": {}, "verdicts": {}}
    for r in store.query("SELECT id, status, main_task FROM instructions WHERE run_id = ?", [build_run]):
        out["instructions"][inst_key[r["id"]]] = (r["status"], r["main_task"])
    cons_key: dict[int, str] = {}
    for r in store.query("SELECT id, instruction_id, position, text, origin, active FROM constraints"):
        if r["instruction_id"] not in inst_key:
            continue
        k = f"{inst_key[r['instruction_id']]}#{r['position'] if r['active'] else 'old:' + r['text']}"
        cons_key[r["id"]] = k
        out["constraints"][k] = (r["text"], r["origin"], r["active"])
    gen_key: dict[int, str] = {}
    rows = store.query("SELECT id, kind, instruction_id, model, mode, ratio, parent_id, text_hash FROM "
                       "generations ORDER BY id")
    for r in rows:
        if r["instruction_id"] not in inst_key:
            continue
        parent = gen_key.get(r["parent_id"], "") if r["parent_id"] else ""
        k = f"{r['kind']}/{inst_key[r['instruction_id']]}/{r['model']}/{r['mode']}/{r['ratio']}/{parent}"
        gen_key[r["id"]] = k
        out["generations"][k] = r["text_hash"]
    for r in store.query("SELECT generation_id, constraint_id, judge, judging_mode, "
                         "verdict, quote FROM verdicts"):
        if r["generation_id"] in gen_key and r["constraint_id"] in cons_key:
            k = (f"{gen_key[r['generation_id']]}|{cons_key[r['constraint_id']]}|"
                 f"{r['judge']}|{r['judging_mode']}")
            out["verdicts"][k] = (r["verdict"], r["quote"])
    return out


async def build_and_evaluate(store: Store, config: Config, *, n_pairs: int, n_constraints: int,
                             words: int = 60,
                             conditions: tuple[str, ...] = ("single", "none", "direct", "eval"),
                             run_id: str = "b1",
                             passes: int = 4, backoff_base_s: float = 0.005, backoff_cap_s: float = 0.05,
                             audit: dict[str, int] | None = None) -> tuple[int, int]:
    """Build, then evaluate, each run again while anything is unfinished or failed: the
    documented way to resume. ``audit`` (models, judges) also re-runs evaluate while
    ``audit_rows`` finds a row missing. Returns the passes build and evaluate took."""
    from pipeline.llm.client import LLMClient
    from pipeline.stages.build import BuildOptions, run_build
    from pipeline.stages.evaluate import EvaluateOptions, run_evaluate

    client = LLMClient(config, store, backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s)
    options = BuildOptions.from_config(config, n=n_pairs, n_constraints=n_constraints,
                                       words=words, run_id=run_id,
                                       conditions=conditions)
    build_passes = eval_passes = 0
    try:
        for build_passes in range(1, passes + 1):
            summary = await run_build(store, config, client, options)
            if summary.complete and not any(r.failed for r in summary.conditions):
                break
        for eval_passes in range(1, passes + 1):
            result = await run_evaluate(store, config, client, EvaluateOptions(build_run=run_id))
            done = audit is None or all(r.complete for r in audit_rows(
                store, build_run=run_id, n_pairs=n_pairs, conditions=conditions,
                n_constraints=n_constraints, **audit))
            if not result.failed and done:
                break
    finally:
        await client.aclose()
    return build_passes, eval_passes


@dataclass(frozen=True)
class Workload:
    """The size of a whole build + evaluate on the fake server (the fault test and bench/soak.py): one
    place that says what to run, with which roles, and which result rows a complete run leaves."""

    pairs: int
    constraints: int
    models: int
    judges: int
    conditions: tuple[str, ...] = ("single", "none", "direct", "eval")

    def config(self, base_url: str, **knobs: Any) -> Config:
        """``multi_config_toml``'s roles for this many models and judges; ``knobs``: its other options."""
        return parse_config(tomllib.loads(multi_config_toml(base_url, models=self.models, judges=self.judges,
                                                            **knobs)))

    async def run(self, store: Store, config: Config, **resume: Any) -> tuple[int, int]:
        """``build_and_evaluate`` of this workload, resumed until ``rows`` are all there."""
        return await build_and_evaluate(store, config, n_pairs=self.pairs, n_constraints=self.constraints,
                                        conditions=self.conditions,
                                        audit={"models": self.models, "judges": self.judges}, **resume)

    def rows(self, store: Store) -> list[RowCount]:
        return audit_rows(store, build_run="b1", n_pairs=self.pairs, conditions=self.conditions,
                          n_constraints=self.constraints, models=self.models, judges=self.judges)
