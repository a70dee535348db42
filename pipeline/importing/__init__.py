"""Work done elsewhere brought into the store: CS4's released lists, the UNSPECIFIC research
code's CSV outputs, plain JSONL, and responses from another harness.

May import: pipeline.core, pipeline.store, pipeline.llm, pipeline.analysis, pipeline.stages
(the stages own the parsers of their own replies)."""
