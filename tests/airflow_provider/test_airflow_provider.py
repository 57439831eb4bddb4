"""batchval/airflow/_provider.py: what Airflow's providers manager reads of batchval."""

from __future__ import annotations

from importlib.metadata import distribution, entry_points

import batchval
from batchval.airflow._provider import provider_info


def test_the_provider_is_registered_under_airflow_s_entry_point_group() -> None:
    """`apache_airflow_provider` names provider_info, as the installed package declares."""
    (found,) = [
        point
        for point in entry_points(group="apache_airflow_provider")
        if point.dist is not None and point.dist.name == "batchval"
    ]
    assert found.load() is provider_info


def test_provider_info_names_the_distribution_and_its_operator() -> None:
    """Airflow refuses a provider whose package-name is not the distribution's own; name
    and description are the schema's required fields."""
    info = provider_info()
    assert info["package-name"] == distribution("batchval").metadata["Name"]
    assert info["name"]
    assert info["description"]
    assert info["versions"] == [batchval.__version__]
    (operators,) = info["operators"]
    assert operators["python-modules"] == ["batchval.airflow._operator"]
    assert operators["integration-name"] in {i["integration-name"] for i in info["integrations"]}
    (triggers,) = info["triggers"]  # the wait between rounds, imported by the triggerer
    assert triggers["python-modules"] == ["batchval.airflow._trigger"]
    (hooks,) = info["hooks"]
    assert hooks["python-modules"] == ["batchval.airflow._hook"]


def test_the_batchval_connection_type_declares_its_form() -> None:
    """The `batchval` connection type names its hook and declares its form as Airflow 3
    reads it without importing the hook: the token URL and the scope as fields of the
    extra, the base URL, client id and secret as the relabelled host, login and password,
    each with a placeholder; the fields batchval does not read hidden."""
    (kind,) = provider_info()["connection-types"]
    assert kind["connection-type"] == "batchval"
    assert kind["hook-class-name"] == "batchval.airflow._hook.BatchvalHook"
    assert set(kind["conn-fields"]) == {"auth_url", "scope"}
    assert kind["conn-fields"]["scope"]["schema"]["enum"] == ["live", "test", None]
    shown = kind["ui-field-behaviour"]
    assert shown["relabeling"] == {
        "host": "Base URL",
        "login": "Client ID",
        "password": "Client secret",
    }
    assert set(shown["placeholders"]) == {"host", "login", "password", "auth_url", "scope"}
    assert set(shown["hidden-fields"]) == {"schema", "port"}


def test_the_airflow_extra_asks_for_airflow_3_azure_s_and_openlineage_s_providers() -> None:
    """`pip install 'batchval[airflow]'` brings Airflow 3 (the task SDK the operator uses),
    Microsoft Azure's provider (its `wasb` connection type, for a storage connection) and
    the OpenLineage provider (the operator's lineage: batchval/airflow/_lineage.py)."""
    requires = distribution("batchval").requires or []
    extra = [r for r in requires if 'extra == "airflow"' in r]
    assert [r.split(";")[0].strip() for r in extra] == [
        "apache-airflow<4,>=3.3",
        "apache-airflow-providers-microsoft-azure<16,>=15.2",
        "apache-airflow-providers-openlineage<3,>=2.20",
    ]
