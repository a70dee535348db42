"""The ground floor: the error family, progress events, configuration, secret redaction, text
rules (word count, prose, refusals), how an interval is written, the method's named numbers (the
summary ratio's one rule among them), the corpus formats' names, and process lifetimes (no process
outlives its parent).

Imports only the standard library and third-party packages: every other room may import it."""
