"""Scripted stand-ins for tests, benches and dry runs: never used by a real run.

- ``fake_server``: a scripted OpenAI-compatible server on 127.0.0.1 (chat, Files and Batches
  APIs) whose replies, faults and junk a test decides;
- ``responders``: ``ScriptedModel``, which answers every stage's prompt the way a well-behaved
  model would, with a tiny store of paired articles and configs pointing at the fake server.

Only tests, ``bench/`` and the ``--dry-run`` estimator (``pipeline.stages.estimate``, for its
placeholder replies) import this package; ``tests/test_layers.py`` checks that.
"""
