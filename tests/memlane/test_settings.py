"""The settings object: nested areas, their environment variables, and the first release's flat
names (kept working with a warning, or failing with a message that names the new place)."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from cluster.backfill_cmd import worker_settings
from memlane.settings import LEGACY, Settings, env_name


def test_nested_environment_variables(monkeypatch):
    monkeypatch.setenv("MEMLANE_RECALL__RRF_K", "17")
    monkeypatch.setenv("MEMLANE_LLM__RETAIN__BASE_URL", "http://retain/v1")
    monkeypatch.setenv("MEMLANE_SERVE__API_KEYS", '{"k1": ["alice"], "admin": "*"}')
    s = Settings()
    assert s.recall.rrf_k == 17
    assert s.llm.retain.base_url == "http://retain/v1"
    assert s.llm.reflect.base_url is None
    assert s.serve.api_keys == {"k1": ["alice"], "admin": "*"}


def test_legacy_environment_variables_map_and_warn(monkeypatch, caplog):
    monkeypatch.setenv("MEMLANE_RRF_K", "23")
    monkeypatch.setenv("MEMLANE_LLM_QA_MODEL", "judge")
    monkeypatch.setenv("MEMLANE_CHANNEL_WEIGHTS", '{"lexical": 1.0, "semantic": 0.5}')
    with caplog.at_level(logging.WARNING, logger="memlane.settings"):
        s = Settings()
    assert s.recall.rrf_k == 23
    assert s.llm.qa.model == "judge"
    assert s.recall.channel_weights == {"lexical": 1.0, "semantic": 0.5}
    assert any("MEMLANE_RECALL__RRF_K" in r.getMessage() for r in caplog.records)


def test_new_variable_wins_over_legacy(monkeypatch):
    monkeypatch.setenv("MEMLANE_MILVUS_URI", "http://old:1")
    monkeypatch.setenv("MEMLANE_STORE__MILVUS_URI", "http://new:2")
    assert Settings().store.milvus_uri == "http://new:2"
    assert Settings().milvus_target() == "http://new:2"


def test_legacy_keyword_and_model_copy():
    with pytest.warns(DeprecationWarning, match="retain.chunk_max_turns"):
        s = Settings(chunk_max_turns=3)
    assert s.retain.chunk_max_turns == 3
    with pytest.warns(DeprecationWarning, match="llm.base_url"):
        t = s.model_copy(update={"llm_base_url": "http://x/v1", "recall": {"graph_hops": 3}})
    assert t.llm.base_url == "http://x/v1"
    assert t.recall.graph_hops == 3
    assert t.recall.rrf_k == s.recall.rrf_k  # the rest of the area is kept
    assert t.retain.chunk_max_turns == 3
    assert s.llm.base_url is None  # the original is untouched


def test_model_copy_validates():
    with pytest.raises(ValidationError, match="recall.rrf_k"):
        Settings().model_copy(update={"recall": {"rrf_k": 0}})


def test_old_attribute_names_the_new_place():
    with pytest.raises(AttributeError, match=r"Settings\.recall\.rrf_k"):
        _ = Settings().rrf_k  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no_such_field"):
        _ = Settings().no_such_field  # type: ignore[attr-defined]


def test_every_legacy_name_has_a_home():
    s = Settings()
    for name, path in LEGACY.items():
        node = s
        for part in path:
            node = getattr(node, part)  # raises if the map points nowhere
        assert env_name(path).startswith("MEMLANE_") and "__" in env_name(path), name


def test_worker_settings_leave_secrets_and_location_out():
    s = Settings(
        store={"milvus_uri": "http://m:1", "milvus_token": "tok"},
        llm={"api_key": "sk-a", "reflect": {"api_key": "sk-b", "model": "m"}},
    )
    sent = worker_settings(s)
    assert "data_dir" not in sent
    assert "milvus_uri" not in sent["store"] and "milvus_token" not in sent["store"]
    assert "api_key" not in sent["llm"] and "api_key" not in sent["llm"]["reflect"]
    assert sent["llm"]["reflect"]["model"] == "m"
    # what is sent rebuilds the same settings, less the secrets
    rebuilt = Settings(**sent)
    assert rebuilt.llm.reflect.model == "m" and rebuilt.llm.api_key is None


def test_secrets_file_supplies_keys_below_the_environment(tmp_path, monkeypatch):
    from memlane.settings import SECRETS_FILE_VAR, Settings

    path = tmp_path / "secrets.env"
    path.write_text(
        'MEMLANE_SERVE__API_KEYS="{\\"k-file\\": [\\"alice\\"], \\"k-lim\\": {\\"banks\\": \\"*\\", '
        '\\"rate_limit_per_s\\": 3}}"\n'
        'MEMLANE_LLM__API_KEY="sk-from-file"\n'
    )
    monkeypatch.setenv(SECRETS_FILE_VAR, str(path))
    s = Settings()
    assert s.serve.api_keys["k-file"] == ["alice"]
    assert s.serve.api_keys["k-lim"].rate_limit_per_s == 3
    assert s.llm.api_key.get_secret_value() == "sk-from-file"
    monkeypatch.setenv("MEMLANE_LLM__API_KEY", "sk-from-env")  # the environment wins
    assert Settings().llm.api_key.get_secret_value() == "sk-from-env"
    monkeypatch.setenv(SECRETS_FILE_VAR, str(tmp_path / "missing.env"))
    with pytest.raises(ValueError, match="MEMLANE_SECRETS_FILE=.*missing.env: no such file"):
        Settings()


def test_split_secrets_moves_every_credential_under_its_current_name():
    from memlane.settings import split_secrets

    public, secret = split_secrets(
        {
            "MEMLANE_API_KEYS": '{"k": "*"}',  # first-release flat name
            "MEMLANE_LLM__REFLECT__API_KEY": "sk-r",
            "MEMLANE_STORE__MILVUS_TOKEN": "root:pw",
            "MEMLANE_RECALL__RRF_K": "60",
            "HOME": "/root",
        }
    )
    assert public == {"MEMLANE_RECALL__RRF_K": "60"}
    assert secret == {
        "MEMLANE_SERVE__API_KEYS": '{"k": "*"}',
        "MEMLANE_LLM__REFLECT__API_KEY": "sk-r",
        "MEMLANE_STORE__MILVUS_TOKEN": "root:pw",
    }


def test_background_jobs_have_one_area_and_the_old_names_map_into_it(monkeypatch):
    s = Settings()
    assert (s.background.mode, s.background.tree, s.background.reflect, s.background.models) == (
        "thread",
        False,
        True,
        True,
    )
    with pytest.warns(DeprecationWarning, match="background.tree=True, background.mode=sync"):
        assert Settings(tree={"online": "sync"}).background.model_dump() == {
            "mode": "sync",
            "tree": True,
            "reflect": True,
            "models": True,
            "delay_s": 2.0,
            "max_delay_s": 60.0,
        }
    with pytest.warns(DeprecationWarning, match="background.reflect=False"):
        assert not s.model_copy(update={"llm_background": "off"}).background.reflect
    monkeypatch.setenv("MEMLANE_TREE__ONLINE", "background")
    with pytest.warns(DeprecationWarning, match="MEMLANE_TREE__ONLINE"):
        assert Settings().background.tree
    with pytest.raises(ValidationError, match="tree.online must be one of background, sync, off"):
        Settings(tree={"online": "later"})
