"""Scripted stand-ins for tests and benches: never used by a real run.

- ``fake_server``: a scripted OpenAI-compatible server on 127.0.0.1 (chat, Files and Batches
  APIs) whose replies, faults and junk a test decides;
- ``responders``: ``ScriptedModel``, which answers every stage's prompt the way a well-behaved
  model would, with a tiny store of paired articles and configs pointing at the fake server.

Only tests and ``bench/`` import this package (the ``--dry-run`` estimator's placeholder replies
are pipeline.llm.placeholders); ``tests/test_layers.py`` checks that.
"""
