"""unspecific.toml: refusals name the field; a valid file loads as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.config import LOCAL, default_config, load_config, parse_config
from pipeline.core.errors import ConfigError
from pipeline.stages.settings import section


def endpoint(**fields):
    spec = {"base_url": "https://api.example.com/v1", "model": "m"}
    spec.update(fields)
    return {"endpoints": {"ex": spec}}


def test_missing_key_variable_names_the_field(monkeypatch):
    monkeypatch.delenv("UNSPECIFIC_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_config(endpoint(api_key_env="UNSPECIFIC_TEST_NO_SUCH_KEY"))
    assert "endpoints.ex.api_key_env" in str(err.value)
    assert "UNSPECIFIC_TEST_NO_SUCH_KEY" in str(err.value)


def test_unknown_role_names_the_field():
    with pytest.raises(ConfigError, match=r"roles\.judge: unknown role"):
        parse_config({"roles": {"judge": "local"}})


def test_role_naming_an_unknown_endpoint():
    with pytest.raises(ConfigError, match=r"roles\.judges: no endpoint named 'gpt'"):
        parse_config({"roles": {"judges": ["local", "gpt"]}})


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "api.example.com/v1", "http://", ""])
def test_bad_url_names_the_field(url):
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.base_url"):
        parse_config(endpoint(base_url=url))


@pytest.mark.parametrize(
    "field,value",
    [("concurrency", -1), ("concurrency", 0), ("concurrency", 2.5), ("requests_per_minute", -5),
     ("price_prompt_per_mtok", -0.1), ("timeout_s", 0), ("max_retries", -1), ("concurrency", "4"),
     ("price_cached_prompt_per_mtok", -0.1), ("price_cached_prompt_per_mtok", "0.1")],
)
def test_bad_numbers_name_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"endpoints\.ex\.{field}"):
        parse_config(endpoint(**{field: value}))


def test_unknown_field_names_the_field():
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.temprature: unknown field"):
        parse_config(endpoint(temprature=0.2))


def test_a_key_in_the_file_is_refused():
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.api_key"):
        parse_config(endpoint(api_key="sk-in-the-file"))


def test_unknown_section_and_bad_structured_mode():
    with pytest.raises(ConfigError, match="unknown section"):
        parse_config({"endpoint": {}})
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.structured"):
        parse_config(endpoint(structured="yaml"))


@pytest.mark.parametrize("value", ["true", 1, 0, None, ["yes"]])
def test_a_gbnf_that_is_not_a_bool_names_the_field(value):
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.gbnf: true or false .*GBNF `grammar` field.*got "):
        parse_config(endpoint(gbnf=value))


def test_gbnf_defaults_off_is_on_for_the_local_model_and_a_pool_takes_it_from_its_members():
    assert parse_config(endpoint()).endpoint("ex").gbnf is False
    assert parse_config(endpoint(gbnf=True)).endpoint("ex").gbnf is True
    assert default_config().endpoint(LOCAL).gbnf is True  # llama-cpp-python's server
    # The local endpoint configured in the file keeps the default unless it says otherwise.
    assert parse_config({"endpoints": {"local": {"base_url": "local"}}}).endpoint(LOCAL).gbnf is True
    assert parse_config({"endpoints": {"mine": {"base_url": "local"}}}).endpoint("mine").gbnf is True
    assert parse_config({"endpoints": {"local": {"base_url": "local",
                                                 "gbnf": False}}}).endpoint(LOCAL).gbnf is False
    # A pool sends a grammar to whichever member answers: on only when every member takes one.
    members = {"a": {"base_url": "http://a:8080/v1", "model": "m", "gbnf": True},
               "b": {"base_url": "http://b:8080/v1", "model": "m"}}
    assert parse_config({"endpoints": {**members, "p": {"pool": ["a"]}}}).endpoint("p").gbnf is True
    assert parse_config({"endpoints": {**members, "p": {"pool": ["a", "b"]}}}).endpoint("p").gbnf is False
    with pytest.raises(ConfigError, match=r"endpoints\.p\.gbnf: true, but member\(s\) b do not"):
        parse_config({"endpoints": {**members, "p": {"pool": ["a", "b"], "gbnf": True}}})
    short = parse_config({"endpoints": {"s": {"base_url": ["http://a:8080/v1",
                                                           "http://b:8080/v1"], "model": "m",
                                              "gbnf": True, "judge_format": "lines"}}})
    assert short.endpoint("s").gbnf and short.endpoint("s[1]").gbnf and short.endpoint("s[2]").gbnf
    # The public form carries it and parses back.
    member = {k: v for k, v in short.endpoint("s[1]").public_dict().items() if k != "name" and v is not None}
    pool = {k: v for k, v in short.endpoint("s").public_dict().items() if k != "name"}
    back = parse_config({"endpoints": {"s[1]": member, "s[2]": member, "s": pool}})
    assert back.endpoint("s") == short.endpoint("s") and back.endpoint("s[1]") == short.endpoint("s[1]")


def test_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "unspecific.toml"
    path.write_text('[endpoints.ex]\nbase_url = "nope"\nmodel = "m"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and "endpoints.ex.base_url" in str(err.value)
    path.write_text("[endpoints.ex\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml")


VALID = """
[endpoints.gpt]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
api_key_env = "UNSPECIFIC_TEST_KEY"
concurrency = 8
requests_per_minute = 500
price_prompt_per_mtok = 0.15
price_completion_per_mtok = 0.6
structured = "json_schema"

[endpoints.vllm]
base_url = "http://10.0.0.5:8000/v1"
model = "qwen"
extra_body = { top_k = 20 }

[roles]
generator = "gpt"
judges = ["gpt", "local"]
summarizer = "vllm"
models_under_test = "vllm"

[build]
n_constraints = 39
"""


def test_valid_config_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("UNSPECIFIC_TEST_KEY", "sk-value")
    path = tmp_path / "unspecific.toml"
    path.write_text(VALID)
    config = load_config(path)
    gpt = config.endpoint("gpt")
    assert (gpt.base_url, gpt.model, gpt.concurrency, gpt.requests_per_minute) == (
        "https://api.openai.com/v1", "gpt-4o-mini", 8, 500.0)
    assert (gpt.price_prompt_per_mtok, gpt.price_completion_per_mtok, gpt.structured) == (0.15,
                                                                                          0.6, "json_schema")
    assert gpt.api_key() == "sk-value"
    assert config.endpoint("vllm").extra_body == {"top_k": 20}
    assert config.roles.judges == ("gpt", "local")
    assert config.roles.models_under_test == ("vllm",)
    assert config.roles.naturalness_judge == LOCAL  # unset roles fall back to the local model
    assert config.role("summarizer").name == "vllm"
    assert section(config, "build").n_constraints == 39 and section(config, "build").n_instructions == 25
    assert config.uses_local
    # The public form carries everything but the key, and parses back to the same endpoints.
    public = config.public_dict()
    assert "sk-value" not in repr(public)
    back = {
        name: {k: v for k, v in ep.items() if k not in ("name", "api_key")
               and v is not None}  # TOML has no null
        for name, ep in public["endpoints"].items() if name != LOCAL
    }
    again = parse_config({"endpoints": back, "roles": public["roles"], **public["settings"]})
    assert again.endpoints == config.endpoints
    assert again.roles == config.roles


def test_no_file_means_every_role_on_the_local_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None)
    assert config == default_config()
    assert config.role("generator").is_local and config.uses_local
    assert config.endpoint(LOCAL).concurrency == 1


def test_unknown_endpoint_lookup():
    with pytest.raises(ConfigError, match="no endpoint named 'gpt'"):
        default_config().endpoint("gpt")


def test_api_key_read_at_call_time(monkeypatch):
    monkeypatch.setenv("UNSPECIFIC_TEST_KEY", "first")
    config = parse_config(endpoint(api_key_env="UNSPECIFIC_TEST_KEY"))
    monkeypatch.delenv("UNSPECIFIC_TEST_KEY")
    with pytest.raises(ConfigError, match="UNSPECIFIC_TEST_KEY"):
        config.endpoint("ex").api_key()


def test_example_in_init_template_is_valid(tmp_path):
    from pipeline.cli.init_cmd import TEMPLATE

    path = Path(tmp_path / "unspecific.toml")
    path.write_text(TEMPLATE)
    config = load_config(path)
    assert config.role("generator").is_local


def test_the_docs_settings_table_is_the_declarations() -> None:
    """docs/configuration.md's table is written from the declarations (pipeline.core.config.Endpoint,
    Roles): a setting added, or a default or bound changed, without the docs fails here."""
    from pipeline.outputs.config_docs import settings_table

    docs = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    begin, end = "<!-- settings table: begin -->\n", "<!-- settings table: end -->"
    shown = docs[docs.index(begin) + len(begin):docs.index(end)]
    assert shown == settings_table(), "write the table again: settings_table() (the docs say how)"
    table = settings_table()
    for key in ("concurrency", "timeout_s", "judge_batch", "drain_after", "models_under_test",
                "n_constraints", "response_words", "ratios"):
        assert f"| `{key}` |" in table
    assert "| `concurrency` | whole number | `4` | `1` | >= 1 |" in table  # default, local model's, bound


@pytest.mark.parametrize(("field", "value", "said"), [
    ("concurrency", "4", "a whole number (requests in flight at once), got '4'"),
    ("timeout_s", 0, "more than 0 (seconds one call may take), got 0"),
    ("judge_format", "xml", "one of json, lines"),
    ("batch_discount", True, "a number"),
    ("extra_body", [1], "a table"),
])
def test_a_refusal_says_what_the_setting_takes_and_decides(field, value, said):
    with pytest.raises(ConfigError) as err:
        parse_config(endpoint(**{field: value}))
    assert str(err.value).startswith(f"config: endpoints.ex.{field}: ") and said in str(err.value)


def test_a_key_in_the_file_says_where_keys_go():
    with pytest.raises(ConfigError, match=r"endpoints\.ex\.api_key: put the key in an environment variable"):
        parse_config(endpoint(api_key="sk-in-the-file"))


def test_a_stage_section_is_checked_against_its_declarations(tmp_path):
    """[build], [evaluate] and [pair] (pipeline.stages.settings): a key no section declares, or a value
    outside its bounds, names the file, the section, the key and the value; the command line's values
    meet the same declarations; a section nothing reads is no section."""
    from pipeline.core.errors import StageError
    from pipeline.stages.build import BuildOptions

    path = tmp_path / "unspecific.toml"
    with pytest.raises(StageError, match=r"unspecific\.toml \[evaluate\] min_coverage: at most 1 .*got 1\.5"):
        section(parse_config({"evaluate": {"min_coverage": 1.5}}, path), "evaluate")
    with pytest.raises(StageError, match=r"\[build\] n_constraint: unknown setting \(known: n_instructions"):
        section(parse_config({"build": {"n_constraint": 39}}, path), "build")
    with pytest.raises(StageError, match=r"\[build\] / command line article_words: at least 30 .*got 10"):
        BuildOptions.from_config(parse_config({}, path), words=10)
    listed = parse_config({"build": {"conditions": "single, eval"}}, path)
    assert BuildOptions.from_config(listed).conditions == ("single", "eval")
    with pytest.raises(ConfigError, match="unknown section"):
        parse_config({"report": {"top": 3}}, path)
