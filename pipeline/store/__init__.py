"""The store: one SQLite file (sqlite-utils, WAL), its schema and migrations, and every query.

This is the only room that runs SQL. Stages, analysis and outputs call its typed functions;
the app gets a read-only view (``pipeline.store.view``), never a connection.
May import: pipeline.core."""
