"""One error family for users: each carries a title and a message.

The CLI prints it as a panel and the app shows it as a modal, so one place decides how a
failure reads. Anything that is not an UnspecificError is a bug and shows a traceback.
"""

from __future__ import annotations


class UnspecificError(Exception):
    """Base of every error a user can cause or fix."""

    title = "Error"

    def __init__(self, msg: str, *, title: str | None = None) -> None:
        from pipeline.core.redact import redact

        # An endpoint may echo the key it was sent: no user-facing error ever carries one.
        msg = redact(msg) or msg
        super().__init__(msg)
        self.msg = msg
        if title is not None:
            self.title = title

    def __str__(self) -> str:
        return self.msg


class ConfigError(UnspecificError):
    title = "Configuration error"


class StoreError(UnspecificError):
    title = "Store error"


class CorpusError(UnspecificError):
    title = "Corpus error"


class EndpointError(UnspecificError):
    """An LLM endpoint refused us for good (401/403/404) or kept failing past retries."""

    title = "LLM endpoint error"

    def __init__(self, msg: str, *, title: str | None = None, member_fault: bool = False) -> None:
        super().__init__(msg, title=title)
        # The server refused us for good (key, permission, model): in a pool, that member is
        # taken out and the call goes to another; a bad request is the request's fault instead.
        self.member_fault = member_fault


class ParseError(UnspecificError):
    """An LLM reply broke the output contract, even after the repair round."""

    title = "Unparseable LLM reply"


class EmbeddingError(UnspecificError):
    """An embedding model is missing or would not load."""

    title = "Embedding model error"


class PromptError(UnspecificError):
    title = "Prompt template error"


class LocalModelError(UnspecificError):
    title = "Local model error"


class LocalServerDied(LocalModelError):
    """The embedded llama.cpp server ended by itself: a run stops at once, never retries."""

    title = "Local model server died"


class StageError(UnspecificError):
    title = "Stage error"


class UnusableEndpointError(EndpointError):
    """An endpoint answers, but reply after reply breaks the output contract (a judge returning
    junk with 200 OK): the step stops at once rather than storing nothing but missing verdicts."""


class BatchPending(Exception):
    """Batch mode: the call was left to a batch (pipeline.llm.batch) and has no answer yet. Not a
    failure: the stage counts the unit as waiting and takes it up again once the batch is
    collected. Deliberately not an UnspecificError nor a ValueError, so no stage mistakes it for
    a failed unit or a refused reply."""

    def __init__(self, endpoint: str, *, failed: bool = False) -> None:
        super().__init__(f"endpoint '{endpoint}': waiting on a batch"
                         + (" item that failed" if failed else ""))
        self.endpoint = endpoint
        self.failed = failed
