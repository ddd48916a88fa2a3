"""The Grafana dashboards of deploy/grafana (issue 13): written as code, the checked-in JSON is
what the code generates, the overview has every panel the issue lists, every service has its
own dashboard, and every panel's PromQL parses and uses catalogued metrics only. Costs well
under a second."""

from __future__ import annotations

import runpy

from deploy_support import DEPLOY, catalogue, dashboard_queries, metric_names, uncatalogued

GENERATOR = DEPLOY / "grafana" / "dashboards.py"

# The overview panels issue 13 lists, by title.
OVERVIEW = {
    "Tables online",
    "Players online",
    "Actions/s",
    "Action p99",
    "Matchmaking wait p50 and p99 by lobby",
    "Queue depth by lobby",
    "Settlements/s",
    "Chips in escrow",
    "Errors by service and code",
}


def test_the_checked_in_dashboards_are_what_the_code_generates() -> None:
    generated = runpy.run_path(str(GENERATOR))["rendered"]()
    on_disk = {
        path.name: path.read_text() for path in (GENERATOR.parent / "dashboards").glob("*.json")
    }
    assert set(on_disk) == set(generated), "run: python deploy/grafana/dashboards.py"
    for name, text in generated.items():
        assert on_disk[name] == text, f"{name} is stale: run python deploy/grafana/dashboards.py"


def test_there_is_an_overview_with_every_panel_the_issue_lists_and_one_board_per_service() -> None:
    boards = dashboard_queries()
    assert set(boards) == {
        "overview.json",
        "bot.json",
        "ledger.json",
        "matchmaking.json",
        "table-engine.json",
        "web-gateway.json",
    }
    assert {title for title, _ in boards["overview.json"]} == OVERVIEW
    wait = [expr for title, expr in boards["overview.json"] if title.startswith("Matchmaking wait")]
    assert any("0.5," in expr for expr in wait) and any("0.99," in expr for expr in wait)


def test_every_panel_query_parses_and_uses_catalogued_metrics_only() -> None:
    rows = catalogue()
    for board, panels in dashboard_queries().items():
        for title, expr in panels:
            assert metric_names(expr), f"{board} / {title}: a query that selects no metric"
            assert not uncatalogued(expr, rows), f"{board} / {title}: {uncatalogued(expr, rows)}"
