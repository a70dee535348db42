"""The ``verdicts`` table: judge x text x constraint, Yes/No (NULL: missing, never a No), the
quote a Yes carries and whether it was found in the text."""

from __future__ import annotations
