"""The store: one SQLite file (sqlite-utils, WAL), its schema and migrations, and every query.

This is the only room that runs SQL. Stages, analysis and outputs call its typed functions;
the app gets a read-only view (``pipeline.store.view``) and one narrow writer of what people give in
it (``pipeline.store.app_writer``), never a connection or a Store.
May import: pipeline.core."""
