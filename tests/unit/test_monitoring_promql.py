"""The small PromQL reader the dashboard checks rely on."""

from __future__ import annotations

import pytest

from mcclab.monitoring.promql import PromqlError, read, substitute


def test_metrics_labels_and_matchers():
    u = read('sum by (flow, node) (rate(mcc_agent_bytes_received_total{run="$run", '
             'role="receiver"}[$__rate_interval])) / on (flow) group_left x_total')
    assert u.metrics == {"mcc_agent_bytes_received_total", "x_total"}
    assert u.labels == {"flow", "node", "run", "role"}
    assert u.label_values("role") == {"receiver"}


def test_aggregation_before_by_is_not_a_metric():
    assert read("sum by (a) (m)").metrics == {"m"}
    assert read("max without (a) (m)").metrics == {"m"}
    assert read("count(m) by (a)").metrics == {"m"}


def test_keywords_numbers_offsets_and_strings_are_not_metrics():
    u = read('(sum(a))^2 / (count(a) * sum(a ^ 2)) and b offset 5m or c{x=~"d|e"} > bool 1e3')
    assert u.metrics == {"a", "b", "c"}
    assert u.labels == {"x"}


def test_name_matcher_counts_as_a_metric():
    assert read('{__name__="up", run="r"}').metrics == {"up"}


def test_label_replace_is_refused():
    with pytest.raises(PromqlError):
        read('label_replace(up, "a", "$1", "b", "(.*)")')


def test_unreadable_input_is_refused():
    with pytest.raises(PromqlError):
        read("up{run}")


def test_substitute_grafana_variables():
    assert substitute('rate(x{run="$run"}[$__rate_interval])', {"run": "r1"}) == \
        'rate(x{run="r1"}[5s])'
    assert substitute("${run}", {"run": "r2"}) == "r2"
