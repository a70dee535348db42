"""The stages' sections of unspecific.toml ([build], [evaluate], [pair]), each setting declared once
with its type, default, bounds and what it decides, as pipeline.core.config declares an endpoint's.

A stage reads its section with ``section``: a key the section does not declare, or a refused value,
is a StageError naming the file, the section, the key and the value. The command line's values are
checked against the same declarations (``checked``), so a bound is written once for both."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import Field, ValidationError, field_validator
from pydantic.dataclasses import dataclass

from pipeline.analysis.coverage import MIN_COVERAGE
from pipeline.analysis.flags import FlagSettings
from pipeline.core.config import STRICT, JudgingMode, refusal
from pipeline.core.definitions import DEFAULT_RATIOS, PAIR_FLOOR
from pipeline.core.errors import StageError
from pipeline.stages.generation import SUMMARY_SLACK
from pipeline.stages.synthesis import CONDITIONS

PairRule = Literal["paper", "research"]  # which pairing of the corpus a build takes its pairs from
RULES: tuple[str, ...] = get_args(PairRule)
ResponseMode = Literal["direct", "edit"]
Condition = Literal[CONDITIONS]  # type: ignore[valid-type]
# A list from the file (TOML has no tuple) is taken as the list it is.
AS_LIST = Field(strict=False)
DEFAULT_WORDS = 500  # a response's length asked for; the exported harness tasks ask the same


@dataclass(frozen=True, config=STRICT)
class BuildSettings:
    """[build]: what `unspecific build` makes, unless its command line says otherwise."""

    n_instructions: Annotated[int, Field(ge=1, description="pairs built (one instruction per pair and "
                                                           "condition); --n")] = 25
    n_constraints: Annotated[int, Field(ge=1, description="constraints per instruction; --constraints")] = 39
    article_words: Annotated[int, Field(ge=30, description="the base article's length in words")] = 500
    rule: Annotated[PairRule, Field(description="which pairing the pairs come from")] = "paper"
    contradictions: Annotated[bool, Field(description="whether a model checks each instruction's "
                                                      "constraints for contradictions")] = False
    embedder: Annotated[str | None, Field(description="the constraint-reference similarity's embedder: "
                                                      "mpnet, minilm, lexical or a model folder (unset: "
                                                      "mpnet); --embedder")] = None
    judging_mode: Annotated[JudgingMode | None, Field(description="how the base article is judged (unset: "
                                                                  "the base judge's own)")] = None
    generator: Annotated[str | None, Field(description="the endpoint that writes (unset: roles."
                                                       "generator)")] = None
    base_judge: Annotated[str | None, Field(description="the endpoint that judges the base article "
                                                        "(unset: the first of roles.judges)")] = None
    domain: Annotated[str, Field(min_length=1, description="the corpus domain the pairs come from")] = "news"
    conditions: Annotated[tuple[Condition, ...], AS_LIST, Field(min_length=1, description="the conditions "
                                                                "built (a list, or names with commas)")] = \
        CONDITIONS
    repair_rounds: Annotated[int, Field(ge=0, description="rounds asking for exactly the missing items "
                                                          "when a reply is short")] = 1
    batch: Annotated[bool, Field(description="whether build sends its calls through a batch API by "
                                             "default (--batch)")] = False
    gate: Annotated[bool, Field(description="whether every constraint is checked atomic and distinct (a "
                                            "common one also unspecific and held on both references) "
                                            "before it is kept; --no-gate")] = True
    allow_dissimilar: Annotated[bool, Field(description="whether pairs below [pair] floor may be built; "
                                                        "--allow-dissimilar")] = False
    flag_ngram_n: Annotated[int, Field(ge=1, description="the copied_ngram flag's n-gram length")] = \
        FlagSettings.ngram_n
    leak_lexical_gap: Annotated[float, Field(ge=0, description="the specificity_leak flag's lexical "
                                                               "gap between the references")] = \
        FlagSettings.leak_lexical_gap
    leak_min_words: Annotated[int, Field(ge=0, description="... and how many more content words from "
                                                           "one reference")] = \
        FlagSettings.leak_min_words

    def flags(self) -> FlagSettings:
        """The flags' thresholds (pipeline.analysis.flags)."""
        return FlagSettings(ngram_n=self.flag_ngram_n, leak_lexical_gap=self.leak_lexical_gap,
                            leak_min_words=self.leak_min_words, leak_embedding_gap=self.leak_embedding_gap,
                            duplicate_score=self.duplicate_score)
    leak_embedding_gap: Annotated[float, Field(ge=0, description="the specificity_leak flag's gap in "
                                                                 "similarity between the references")] = \
        FlagSettings.leak_embedding_gap
    duplicate_score: Annotated[float, Field(ge=0, le=100, description="the duplicate flag's fuzzy "
                                                                      "score (0-100) between two "
                                                                      "constraints")] = \
        FlagSettings.duplicate_score

    @field_validator("conditions", mode="before")
    @classmethod
    def _names_with_commas(cls, value: Any) -> Any:
        return [c.strip() for c in value.split(",") if c.strip()] if isinstance(value, str) else value


@dataclass(frozen=True, config=STRICT)
class EvaluateSettings:
    """[evaluate]: what `unspecific evaluate` (and naturalness) does, unless its command line says
    otherwise."""

    mode: Annotated[ResponseMode, Field(description="how a response is written: from the instruction "
                                                    "alone, or by editing the base article; "
                                                    "--mode")] = "direct"
    ratios: Annotated[tuple[Annotated[float, Field(gt=0, lt=1)], ...], AS_LIST, Field(
        description="the summary ratios, each between 0 and 1; --ratios")] = DEFAULT_RATIOS
    judging: Annotated[JudgingMode | None, Field(description="one judging mode for every judge (unset: "
                                                             "each judge's own); --judging")] = None
    response_words: Annotated[int, Field(ge=20, description="a response's length in words; "
                                                            "--words")] = DEFAULT_WORDS
    summary_slack: Annotated[float | None, Field(ge=0, description="a summary is accepted within this "
                                                                   "share of its target length (false: "
                                                                   "any length)")] = SUMMARY_SLACK
    min_coverage: Annotated[float, Field(ge=0, le=1, description="a judged group with fewer of its "
                                                                 "verdicts than this share fails the "
                                                                 "evaluation")] = MIN_COVERAGE
    batch: Annotated[bool, Field(description="whether evaluate (and naturalness) send their calls "
                                             "through a batch API by default (--batch)")] = False

    @field_validator("summary_slack", mode="before")
    @classmethod
    def _false_is_none(cls, value: Any) -> Any:
        return None if value is False else value


@dataclass(frozen=True, config=STRICT)
class PairSettings:
    """[pair]: how the app's Build screen pairs a domain."""

    domain: Annotated[str, Field(min_length=1, description="the corpus domain paired")] = "news"
    rule: Annotated[PairRule, Field(description="the pairing rule")] = "paper"
    model: Annotated[str | None, Field(description="the embedding model (unset: the default)")] = None
    floor: Annotated[float, Field(ge=-1, le=1, description="the cosine under which a pair is reported "
                                                           "as not similar, and not built from unless "
                                                           "allowed")] = PAIR_FLOOR


SECTIONS: dict[str, type] = {"build": BuildSettings, "evaluate": EvaluateSettings, "pair": PairSettings}
S = TypeVar("S")


def checked(cls: type[S], values: dict[str, Any], where: str) -> S:
    """``values`` as ``cls``'s settings, every one checked against its declaration; a refusal is a
    StageError naming ``where`` (the file and section, or the command line), the key and the value."""
    known = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for key in values:
        if key not in known:
            raise StageError(f"{where} {key}: unknown setting (known: {', '.join(known)})")
    try:
        return cls(**values)
    except ValidationError as exc:
        raise refusal(where, cls, exc, sep=" ", error=StageError) from None


def section(config: Any, name: str) -> Any:
    """The config's [``name``] section as its declared settings (each unset one at its default)."""
    cls = SECTIONS[name]
    raw = getattr(config, "settings", {}).get(name, {}) if config is not None else {}
    return checked(cls, dict(raw), f"{getattr(config, 'path', None) or 'config'} [{name}]")
