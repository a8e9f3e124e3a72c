"""The settings object: nested areas, their environment variables, the secrets file; the names
removed at 0.1.0 failing wherever they are given with an error that names the setting to use;
and the entry points' changes to the defaults, applied from their one table."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cluster.backfill_cmd import worker_settings
from memlane.settings import SECRETS_FILE_VAR, RemovedSetting, Settings, env_name
from memlane.settings.entry_points import ENTRY_POINT_DEFAULTS, with_entry_point
from memlane.settings.removed import FLAT


def test_nested_environment_variables(monkeypatch):
    monkeypatch.setenv("MEMLANE_RECALL__RRF_K", "17")
    monkeypatch.setenv("MEMLANE_LLM__RETAIN__BASE_URL", "http://retain/v1")
    monkeypatch.setenv("MEMLANE_SERVE__API_KEYS", '{"k1": ["alice"], "admin": "*"}')
    s = Settings()
    assert s.recall.rrf_k == 17
    assert s.llm.retain.base_url == "http://retain/v1"
    assert s.llm.reflect.base_url is None
    assert s.serve.api_keys == {"k1": ["alice"], "admin": "*"}


def test_removed_flat_variable_fails_naming_its_replacement(monkeypatch):
    monkeypatch.setenv("MEMLANE_RRF_K", "23")
    with pytest.raises(
        RemovedSetting, match=r"^MEMLANE_RRF_K was renamed: use MEMLANE_RECALL__RRF_K \(recall.rrf_k\)$"
    ):
        Settings()
    # The new name beside it does not hide the old one: one name per setting.
    monkeypatch.setenv("MEMLANE_RECALL__RRF_K", "23")
    with pytest.raises(RemovedSetting, match="MEMLANE_RRF_K"):
        Settings()
    monkeypatch.delenv("MEMLANE_RRF_K")
    monkeypatch.setenv("MEMLANE_LLM_QA_MODEL", "judge")
    with pytest.raises(RemovedSetting, match="use MEMLANE_LLM__QA__MODEL"):
        Settings()
    monkeypatch.delenv("MEMLANE_LLM_QA_MODEL")
    assert Settings().recall.rrf_k == 23


def test_removed_keyword_and_model_copy_key_fail_naming_the_new_place():
    with pytest.raises(ValidationError, match="'chunk_max_turns' was renamed: use retain.chunk_max_turns"):
        Settings(chunk_max_turns=3)
    s = Settings(retain={"chunk_max_turns": 3})
    with pytest.raises(RemovedSetting, match="'llm_base_url' was renamed: use llm.base_url"):
        s.model_copy(update={"llm_base_url": "http://x/v1"})
    t = s.model_copy(update={"llm": {"base_url": "http://x/v1"}, "recall": {"graph_hops": 3}})
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


def test_every_removed_flat_name_points_to_a_setting():
    s = Settings()
    for name, path in FLAT.items():
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


def test_split_secrets_separates_every_credential():
    from memlane.settings import split_secrets

    public, secret = split_secrets(
        {
            "MEMLANE_SERVE__API_KEYS": '{"k": "*"}',
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


def test_background_jobs_have_one_area_and_the_old_names_fail(monkeypatch):
    s = Settings()
    assert (s.background.mode, s.background.tree, s.background.reflect, s.background.models) == (
        "thread",
        False,
        True,
        True,
    )
    # Each old value names the background fields it meant.
    with pytest.raises(
        ValidationError, match=r"tree.online was renamed: use background.tree=True and background.mode='sync'"
    ):
        Settings(tree={"online": "sync"})
    with pytest.raises(RemovedSetting, match=r"llm_background' was renamed: use background.reflect=False"):
        s.model_copy(update={"llm_background": "off"})
    with pytest.raises(
        RemovedSetting, match=r"tree.online was renamed: use background.tree and background.mode"
    ):
        s.model_copy(update={"tree": {"online": "later"}})
    monkeypatch.setenv("MEMLANE_TREE__ONLINE", "background")
    with pytest.raises(
        RemovedSetting, match=r"^MEMLANE_TREE__ONLINE was renamed: use MEMLANE_BACKGROUND__TREE=true$"
    ):
        Settings()
    monkeypatch.delenv("MEMLANE_TREE__ONLINE")
    monkeypatch.setenv("MEMLANE_LLM__BACKGROUND", "sync")
    with pytest.raises(
        RemovedSetting,
        match=r"^MEMLANE_LLM__BACKGROUND was renamed: use MEMLANE_BACKGROUND__REFLECT=true and "
        r"MEMLANE_BACKGROUND__MODE=sync$",
    ):
        Settings()


def test_removed_name_in_the_secrets_file_fails_naming_the_file_and_the_replacement(tmp_path, monkeypatch):
    path = tmp_path / "secrets.env"
    path.write_text("MEMLANE_LLM__API_KEY=sk-a\nMEMLANE_TREE__ONLINE=off\n")
    monkeypatch.setenv(SECRETS_FILE_VAR, str(path))
    with pytest.raises(RemovedSetting) as caught:
        Settings()
    assert str(caught.value) == (
        f"MEMLANE_TREE__ONLINE in {SECRETS_FILE_VAR} ({path}) was renamed: use MEMLANE_BACKGROUND__TREE=false"
    )
    path.write_text("MEMLANE_LLM_API_KEY=sk-a\n")  # a first-release flat name
    with pytest.raises(RemovedSetting, match="MEMLANE_LLM_API_KEY in .* use MEMLANE_LLM__API_KEY"):
        Settings()
    path.write_text("MEMLANE_LLM__API_KEY=sk-a\n")
    assert Settings().llm.api_key.get_secret_value() == "sk-a"


def test_serve_turns_the_tree_on_unless_the_user_set_it(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLANE_BACKGROUND__TREE", raising=False)
    monkeypatch.delenv("MEMLANE_RECALL__COLD_BANK", raising=False)
    served = with_entry_point("serve", Settings())
    assert served.background.tree is True and served.recall.cold_bank == "store"
    assert Settings().background.tree is False  # the engine's own default is untouched
    monkeypatch.setenv("MEMLANE_BACKGROUND__TREE", "false")  # the user's false is kept
    served = with_entry_point("serve", Settings())
    assert served.background.tree is False and served.recall.cold_bank == "store"
    monkeypatch.delenv("MEMLANE_BACKGROUND__TREE")
    path = tmp_path / "secrets.env"  # so is one from the secrets file
    path.write_text("MEMLANE_RECALL__COLD_BANK=wait\n")
    monkeypatch.setenv(SECRETS_FILE_VAR, str(path))
    served = with_entry_point("serve", Settings())
    assert served.background.tree is True and served.recall.cold_bank == "wait"


def test_every_entry_point_change_names_a_setting_and_says_why():
    s = Settings()
    for entry, changes in ENTRY_POINT_DEFAULTS.items():
        for path, change in changes.items():
            node = s
            for part in path.split("."):
                node = getattr(node, part)  # raises if the table points nowhere
            assert len(change.why) > 20, (entry, path)
