"""Work done elsewhere brought into the store: CS4's released lists, the UNSPECIFIC research
code's CSV outputs, plain JSONL, and responses from another harness.

``importer.import_file`` is the entry point; one module per format (``cs4``, ``research``,
``jsonl``, ``responses``), with ``common`` (options, summary, row problems), ``reading`` (files
to rows) and ``writer`` (rows to the store, through pipeline.store). No SQL here.

May import: pipeline.core, pipeline.store, pipeline.llm, pipeline.analysis, pipeline.stages
(the stages own the parsers of their own replies)."""
