"""The stages of a build and an evaluation, one module per arrow of the data flow: corpus,
pairing, synthesis, revision, the contradiction check, generation, judging, naturalness; and
build, evaluate, demo, the one unit runner that drives them and ``step`` (one stage on a store
path, as the app's Build screen runs it). Each reads its inputs from the store and writes results
back as each unit finishes, so it can be run, re-run and resumed alone.

May import: pipeline.core, pipeline.store, pipeline.llm, pipeline.analysis."""
