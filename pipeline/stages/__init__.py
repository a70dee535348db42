"""The stages of a build and an evaluation, one module per arrow of the data flow: corpus,
pairing, synthesis, revision, generation, judging, naturalness; and build, evaluate, demo and
the one unit runner that drives them. Each reads its inputs from the store and writes results
back as each unit finishes, so it can be run, re-run and resumed alone.

May import: pipeline.core, pipeline.store, pipeline.llm, pipeline.analysis."""
