"""Grammar-held sampling on the embedded model: llama-cpp-python's own chain against
pipeline.llm.grammar_sampling, side by side in one process (issue 11).

Two requests of the demo's kinds, each replayed both ways on the same loaded model:
- "judge": bench/judge_grammar.py's 250-word response against its 20 constraints, in the lines
  format under ``lines_grammar``, at temperature 0 (every judge call of the demo);
- "list": 10 constraints under a JSON schema, drawn at temperature 0.7 with a seed (the
  "more constraints" rounds and eval revision's later asks).
Before each measured reply a short unrelated prompt is sent, so both ways read the whole prompt.
The prompt is read in a call of its own first, so the measured reply is generation alone. The
order alternates over ``--repeats``. For each it prints tokens, seconds, generation speed, how many
steps checked the whole vocabulary, whether the replies are identical, and the speed ratio.

    .venv/bin/python -m bench.grammar_sampling
    .venv/bin/python -m bench.grammar_sampling --repeats 2
"""

from __future__ import annotations

import argparse
import json
import time


def requests() -> dict[str, dict]:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from bench.judge_grammar import CONSTRAINTS, RESPONSE
    from pipeline.llm.prompts import defuse, load_template, numbered
    from pipeline.stages.judging import lines_grammar
    from pipeline.stages.synthesis import list_schema

    judge = load_template("judge_lines").render(text=defuse(RESPONSE), constraints=numbered(CONSTRAINTS),
                                                n=len(CONSTRAINTS))
    ask = [{"role": "user", "content": "Write 10 writing constraints for a news article about a town council "
                                       "meeting on a budget gap, each a full sentence. Reply in JSON."}]
    return {
        "judge": {"messages": judge, "grammar": lines_grammar(len(CONSTRAINTS)), "temperature": 0.0,
                  "max_tokens": 800},
        "list": {"messages": ask,
                 "grammar": json_schema_to_gbnf(json.dumps(list_schema(10, with_task=False))),
                 "temperature": 0.7,
                 "seed": 1, "max_tokens": 900},
    }


def reply(llama, request: dict) -> dict:  # noqa: ANN001
    from llama_cpp import LlamaGrammar

    def grammar():  # noqa: ANN202 - a fresh one per call
        return LlamaGrammar.from_string(request["grammar"], verbose=False)

    params = {k: v for k, v in request.items() if k not in ("messages", "grammar", "max_tokens")}
    llama.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    started = time.perf_counter()  # the prompt read alone, so what follows is generation
    llama.create_chat_completion(messages=request["messages"], max_tokens=1, grammar=grammar(), **params)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    out = llama.create_chat_completion(messages=request["messages"], max_tokens=request["max_tokens"],
                                       repeat_penalty=1.1, grammar=grammar(),
                                       **params)  # 1.1: the server's default
    seconds = time.perf_counter() - started
    sampler = llama._sampler
    return {
        "text": out["choices"][0]["message"]["content"], "tokens": out["usage"]["completion_tokens"],
        "read_s": read_s, "seconds": seconds,
        "full_checks": getattr(sampler, "full_checks", None), "steps": getattr(sampler, "steps", None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)

    from llama_cpp import Llama

    from pipeline.llm import grammar_sampling
    from pipeline.llm.local_model import N_THREADS
    from pipeline.llm.model_file import model_path

    own_init = Llama._init_sampler
    llama = Llama(model_path=str(model_path()), n_ctx=4096, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                  verbose=False)
    grammar_sampling.install()
    ours_init = Llama._init_sampler
    ways = {"own chain": own_init, "grammar_sampling": ours_init}
    asks = requests()
    results: dict[tuple[str, str], list[dict]] = {}
    for repeat in range(args.repeats):
        order = list(ways) if repeat % 2 == 0 else list(reversed(ways))
        for name, request in asks.items():
            for way in order:
                Llama._init_sampler = ways[way]
                r = reply(llama, request)
                results.setdefault((name, way), []).append(r)
                checks = ("" if r["full_checks"] is None
                          else f", whole vocabulary checked on {r['full_checks']} of {r['steps']} steps")
                print(f"{name:5} {way:16} repeat {repeat + 1}: {r['tokens']} tokens in {r['seconds']:.1f} s, "
                      f"{r['tokens'] / r['seconds']:.1f} tokens/s (prompt read before, in "
                      f"{r['read_s']:.1f} s){checks}",
                      flush=True)
    Llama._init_sampler = own_init
    print()
    for name in asks:
        own, ours = results[(name, "own chain")], results[(name, "grammar_sampling")]
        same = all(a["text"] == b["text"] for a, b in zip(own, ours))
        own_s = sum(r["seconds"] for r in own)
        ours_s = sum(r["seconds"] for r in ours)
        print(f"{name}: replies identical: {same}; {sum(r['tokens'] for r in ours)} tokens "
              "generated each way; "
              f"own chain {own_s:.1f} s, grammar_sampling {ours_s:.1f} s: generation "
              f"{own_s / ours_s:.2f}x as fast")
    llama.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
