"""batchval/airflow/provider.py: what Airflow's providers manager reads of batchval."""

from __future__ import annotations

from importlib.metadata import distribution, entry_points

import batchval
from batchval.airflow.provider import provider_info


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
    assert operators["python-modules"] == ["batchval.airflow.operator"]
    assert operators["integration-name"] in {i["integration-name"] for i in info["integrations"]}
    (triggers,) = info["triggers"]  # the wait between rounds, imported by the triggerer
    assert triggers["python-modules"] == ["batchval.airflow.trigger"]


def test_the_airflow_extra_asks_for_airflow_3() -> None:
    """`pip install 'batchval[airflow]'` brings Airflow 3 (the task SDK the operator uses)."""
    requires = distribution("batchval").requires or []
    extra = [r for r in requires if 'extra == "airflow"' in r]
    assert [r.split(";")[0].strip() for r in extra] == ["apache-airflow<4,>=3.3"]
