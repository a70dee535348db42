"""The ground floor: the error family, progress events, configuration, secret redaction, text
rules (word count, prose, refusals) and the method's named numbers.

Imports only the standard library and third-party packages: every other room may import it."""
