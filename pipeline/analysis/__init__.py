"""Numbers from stored results: per-text scores, Org/Core and their intervals, statistics,
coverage, copying and similarity, quality flags, CS4's instruction families, and validation
against people.

Reads the store through its functions and never calls a model to write (embeddings excepted:
the embedder is a local encoder). May import: pipeline.core, pipeline.store, pipeline.llm."""
