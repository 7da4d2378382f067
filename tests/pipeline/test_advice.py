"""Advice rules over synthetic statistics: each built-in fires past its threshold and not before;
rule loading, options and a failing rule are handled as pipeline/advice.py says."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.advice import (
    Advice,
    AdviceRule,
    DeviceSpan,
    Statistics,
    TimelineFacts,
    TxRange,
    TxStat,
    advice_text,
    available_rules,
    build_rules,
    evaluate_rules,
)
from pipeline.errors import UserError
from stages.advice.host import HostGapsRule, ModelLoadRule, TxIdleRule
from stages.advice.operators import DecomposedActivationRule, TopOpTypesRule, TransDataRule

MS = 1_000_000
BUILT_IN = {"transdata", "decomposed_activation", "top_op_types", "tx_idle", "model_load", "host_gaps"}


def stats(ops: dict[str, tuple[int, int]], executions: int = 10, apis: list[tuple[str, str, int, int]] | None = None,
          timeline: TimelineFacts | None = None) -> Statistics:
    """op type → (count, total ns) on device 0; ``executions`` aclmdlExecute calls of 5 ms each."""
    op_rows = [[0, op_type, "AI_CORE", count, total, 0, 0] for op_type, (count, total) in ops.items()]
    api_rows: list[list[Any]] = [["acl", "aclmdlExecute", executions, executions * 5 * MS, 0, 0, 0.0]]
    api_rows += [[level, name, count, total, 0, 0, 0.0] for level, name, count, total in apis or []]
    return Statistics.from_rows(op_rows, api_rows, timeline)


def test_built_in_rules_are_registered_under_the_entry_point_group() -> None:
    assert BUILT_IN <= set(available_rules())
    assert {rule.name for rule in build_rules()} >= BUILT_IN


@pytest.mark.parametrize(("per_run", "fires"), [(2, False), (3, True), (26, True)])
def test_transdata_fires_above_two_per_execution(per_run: int, fires: bool) -> None:
    found = list(TransDataRule().evaluate(stats({"TransData": (per_run * 10, 40 * MS), "Conv2D": (10, 60 * MS)})))
    assert bool(found) is fires
    if fires:
        assert found[0].evidence["per_execution"] == per_run
        assert found[0].evidence["device_share"] == 0.4
        assert "please check and reduce the transData" in found[0].suggestion


def test_transdata_threshold_is_an_option() -> None:
    rule = build_rules(["transdata"], options={"transdata": {"max_per_execution": 30}})[0]
    assert not list(rule.evaluate(stats({"TransData": (260, MS)})))


def test_mish_needs_all_three_parts() -> None:
    parts = {"Softplus": (80, 8 * MS), "Tanh": (80, 6 * MS), "Mul": (96, 4 * MS), "Conv2D": (10, 82 * MS)}
    found = list(DecomposedActivationRule().evaluate(stats(parts)))
    assert [a.evidence["instances"] for a in found] == [80]
    assert found[0].evidence["total_ns"] == 18 * MS and found[0].evidence["device_share"] == 0.18
    for missing in ("Softplus", "Tanh", "Mul"):
        assert not list(DecomposedActivationRule().evaluate(stats({k: v for k, v in parts.items() if k != missing})))


def test_top_op_types_orders_by_total_over_devices() -> None:
    rows = [[0, "Relu", "AI_CORE", 4, 30, 0, 0], [1, "Relu", "AI_CORE", 4, 30, 0, 0],
            [0, "Conv2D", "AI_CORE", 2, 50, 0, 0], [0, "Cast", "AI_CPU", 1, 10, 0, 0]]
    found = list(TopOpTypesRule(TopOpTypesRule.Config(top=2)).evaluate(Statistics.from_rows(rows, [])))
    assert [t["op_type"] for t in found[0].evidence["top"]] == ["Relu", "Conv2D"]
    assert found[0].evidence["top"][0]["total_ns"] == 60 and found[0].severity == "info"


def test_model_load_dominates_only_past_the_executions() -> None:
    load = [("acl", "aclmdlLoadFromFile", 1, 40 * MS)]
    assert list(ModelLoadRule().evaluate(stats({}, executions=5, apis=load)))  # 25 ms of executions
    assert not list(ModelLoadRule().evaluate(stats({}, executions=9, apis=load)))  # 45 ms


def test_tx_idle_names_the_worst_range_of_a_message_once() -> None:
    ranges = (TxRange("load", 0, 5000 * MS, 4900 * MS), TxRange("load", 0, 3000 * MS, 2950 * MS),
              TxRange("busy", 0, 4000 * MS, 100 * MS), TxRange("short", 0, 900 * MS, 900 * MS))
    found = list(TxIdleRule().evaluate(stats({}, timeline=TimelineFacts(longest_ranges=ranges))))
    assert [(a.evidence["message"], a.evidence["idle_ns"]) for a in found] == [("load", 4900 * MS)]


def test_host_gaps_compares_device_idle_with_its_span() -> None:
    busy = TimelineFacts(devices=(DeviceSpan(0, 100, 0, 1000 * MS, 600 * MS),))
    idle = TimelineFacts(devices=(DeviceSpan(0, 100, 0, 1000 * MS, 300 * MS),),
                         tx=(TxStat("preprocess", 10, 30 * MS, 4 * MS), TxStat("load", 1, 9 * MS, 9 * MS)))
    assert not list(HostGapsRule().evaluate(stats({}, timeline=busy)))
    found = list(HostGapsRule().evaluate(stats({}, timeline=idle)))
    assert found[0].evidence["idle_share"] == 0.7
    assert "'preprocess' 3.000 ms" in found[0].detail and "'load'" not in found[0].detail  # once per run only


def test_timeline_rules_wait_for_timeline_facts() -> None:
    rules = build_rules(["tx_idle", "host_gaps"])
    assert evaluate_rules(rules, stats({})) == []


class Broken(AdviceRule):
    name = "broken"

    def evaluate(self, stats: Statistics) -> list[Advice]:
        raise ZeroDivisionError("oops")


def test_a_failing_rule_reports_itself_and_the_others_still_run() -> None:
    found = evaluate_rules([TopOpTypesRule(), Broken()], stats({"Conv2D": (1, MS)}))
    assert [(a.rule, a.severity) for a in found] == [("broken", "error"), ("top_op_types", "info")]
    assert "ZeroDivisionError: oops" in found[0].detail
    assert "[error] rule broken failed" in advice_text(found)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"selected": ["nope"]}, "unknown advice rule 'nope'"),
    ({"selected": ["no_such_module:Rule"]}, "cannot import module 'no_such_module'"),
    ({"selected": ["pipeline.advice:Statistics"]}, "is not an advice rule class"),
    ({"options": {"transdata": {"max_per_execution": -1}}}, "advice rule 'transdata' option max_per_execution"),
    ({"options": {"transdata": {"typo": 1}}}, "option typo: extra inputs are not permitted"),
    ({"selected": ["top_op_types"], "options": {"transdata": {}}}, "options for advice rule 'transdata'"),
])
def test_bad_rule_settings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as caught:
        build_rules(**kwargs)
    assert message in caught.value.line()


def test_a_rule_by_module_path_and_disable() -> None:
    rules = build_rules(["stages.advice.operators:TransDataRule", "top_op_types"], disabled=["top_op_types"])
    assert [type(rule) for rule in rules] == [TransDataRule]


def test_advice_round_trips_through_json() -> None:
    item = Advice("r", "warning", "t", "d", "s", {"n": 1})
    assert Advice.from_json(item.to_json()) == item
