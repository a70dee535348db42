"""Benchmark: the distinct check's thresholds (pipeline.core.definitions DISTINCT_TOKEN_SET, DISTINCT_COSINE)
on labelled pairs of constraints, written for this: near-copies (a paraphrase, a year or a word added, the
same ask reordered) and distinct constraints on the same story (a shared template, another aspect).

Prints, per measure (token-set ratio; cosine under mpnet and MiniLM), how each threshold separates the
labels: the near-copies it catches and the distinct pairs it would wrongly reject, and the same for the
rule the gate uses (either measure at its threshold).

    .venv/bin/python -m bench.gate_pairs [--models mpnet,minilm]
"""

from __future__ import annotations

import argparse

import numpy as np

# (a, b, near-copy?)
PAIRS: list[tuple[str, str, bool]] = [
    # a year or a word added: the "... in 2006", "... in 2007"
    ("Explain the company's market strategy.", "Explain the company's market strategy in 2006.", True),
    ("Explain the company's market strategy in 2006.",
     "Explain the company's market strategy in 2007.", True),
    ("Describe the reaction of investors.", "Describe the reaction of investors to the news.", True),
    ("Discuss the impact on jobs.", "Discuss the impact on jobs in the region.", True),
    ("Mention the role of regulators.", "Mention the role of the regulators involved.", True),
    # paraphrases in other words
    ("Describe how shareholders reacted to the results.",
     "Explain the response of shareholders to the results.",
     True),
    ("Explain why profits fell.", "Give the reasons for the drop in profits.", True),
    ("Discuss the risks the company faces.", "Describe the dangers facing the firm.", True),
    ("Include a quote from an analyst.", "Quote a market analyst.", True),
    ("Describe the background to the deal.", "Explain what led up to the agreement.", True),
    ("Explain what is expected to happen next.", "Describe the likely next steps.", True),
    ("Mention the scale of the losses in general terms.", "Give a sense of how large the losses were.", True),
    ("End with the outlook for the coming year.", "Close the text with the prospects for next year.", True),
    ("Discuss the effect of the merger on competition.", "Explain how the merger affects competitors.", True),
    ("Describe the company's advertising revenue.", "Discuss the firm's income from advertising.", True),
    ("Explain the causes of the price rise.", "Explain what caused prices to rise.", True),
    ("Describe the views of the unions.", "Report what the trade unions think.", True),
    ("Compare this year's results with last year's.", "Contrast the results with those of the previous year.",
     True),
    ("Open with the most important figure.", "Begin the text with its key number.", True),
    ("Discuss the company's plans for expansion.", "Describe how the company intends to expand.", True),
    # distinct: same template, another subject
    ("Describe the reaction of investors.", "Describe the reaction of employees.", False),
    ("Discuss the impact on jobs.", "Discuss the impact on consumers.", False),
    ("Explain the company's market strategy.", "Explain the company's pricing policy.", False),
    ("Describe the views of the unions.", "Describe the views of the government.", False),
    ("Explain why profits fell.", "Explain why sales rose.", False),
    ("Mention the role of regulators.", "Mention the role of the chief executive.", False),
    ("Discuss the risks the company faces.", "Discuss the opportunities the company sees.", False),
    ("Include a quote from an analyst.", "Include a quote from a customer.", False),
    ("Describe the company's advertising revenue.", "Describe the company's subscription revenue.", False),
    ("Discuss the effect of the merger on competition.",
     "Discuss the effect of the merger on prices.", False),
    # distinct: another aspect of the same story
    ("Describe the background to the deal.", "Explain what is expected to happen next.", False),
    ("Explain the causes of the price rise.", "Describe who is hurt most by the price rise.", False),
    ("Compare this year's results with last year's.",
     "Mention how analysts had forecast the results.", False),
    ("Open with the most important figure.", "End with a question for the reader.", False),
    ("Discuss the company's plans for expansion.", "Discuss the company's debts.", False),
    ("Describe how shareholders reacted to the results.",
     "Describe how the share price moved after the results.",
     False),
    ("Explain the role of online advertising in the results.",
     "Explain the role of cost cutting in the results.",
     False),
    ("Describe the sequence of events that led to the sale.",
     "Describe the reaction of the buyers to the sale.",
     False),
    ("Mention the scale of the losses in general terms.",
     "Mention the number of staff affected in general terms.",
     False),
    ("Write in a neutral, factual tone.", "Cite at least two sources for the figures.", False),
    ("Discuss the long-term consequences for the industry.",
     "Discuss the short-term effect on the share price.",
     False),
    ("Explain how the company's debt was reduced.",
     "Explain how the company's revenue was increased.", False),
]


def main() -> None:
    from pipeline.analysis.embeddings import get_embedder, normalize_rows
    from pipeline.analysis.gate import token_set
    from pipeline.core.definitions import DISTINCT_COSINE, DISTINCT_COSINES, DISTINCT_TOKEN_SET

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mpnet,minilm")
    args = parser.parse_args()
    labels = np.array([y for _, _, y in PAIRS])
    tokens = np.array([token_set(a, b) for a, b, _ in PAIRS])
    print(f"{len(PAIRS)} labelled pairs: {labels.sum()} near-copies, {(~labels).sum()} distinct")
    _sweep("token-set", tokens, labels, [80, 85, 88, 90, 92, 95, 100])
    for model in args.models.split(","):
        emb = get_embedder(model)
        va = normalize_rows(emb.embed([a for a, _, _ in PAIRS]))
        vb = normalize_rows(emb.embed([b for _, b, _ in PAIRS]))
        cos = (va * vb).sum(axis=1)
        _sweep(f"cosine {model}", cos, labels, [0.75, 0.8, 0.82, 0.85, 0.88, 0.9])
        cut = DISTINCT_COSINES.get(emb.name, DISTINCT_COSINE)
        either = (tokens >= DISTINCT_TOKEN_SET) | (cos >= cut)
        print(f"  gate rule (token-set >= {DISTINCT_TOKEN_SET:g} or cosine >= {cut:g}) "
              f"with {model}: catches {int((either & labels).sum())} of {labels.sum()} near-copies, "
              f"rejects {int((either & ~labels).sum())} of {(~labels).sum()} distinct")
        for (a, b, y), t, c in zip(PAIRS, tokens, cos, strict=True):
            wrong = ((t >= DISTINCT_TOKEN_SET) | (c >= cut)) != y
            if wrong:
                what = "missed" if y else "wrongly rejected"
                print(f"    {what}: token-set {t:.0f} cosine {c:.2f}: {a!r} / {b!r}")


def _sweep(name: str, values: np.ndarray, labels: np.ndarray, thresholds: list[float]) -> None:
    print(f"{name}: near-copies median {np.median(values[labels]):.2f}, distinct median "
          f"{np.median(values[~labels]):.2f}")
    for t in thresholds:
        hit = values >= t
        print(f"  >= {t:g}: catches {int((hit & labels).sum())} of {labels.sum()}, wrongly rejects "
              f"{int((hit & ~labels).sum())} of {(~labels).sum()}")


if __name__ == "__main__":
    main()
