"""What people read: the report (terminal and charts), the self-contained HTML report, JSONL
export, and the app served in a browser.

Compute nothing of their own: every number comes from pipeline.analysis.
May import every room below: core, store, llm, analysis, stages, importing."""
