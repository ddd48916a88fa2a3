"""masa's Grafana dashboards as code (grafanalib): an overview and one dashboard per service.

``python deploy/grafana/dashboards.py`` writes them as the JSON models Grafana provisions from
files (``dashboards/*.json``, checked in); a test fails when the JSON is older than this file.
Every query uses catalogued metrics only (deploy/README.md), and the jobs are named
``masa-<service>`` as in ``deploy/prometheus``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard, GridPos, Stat, Target, TimeSeries

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
RATE = "[5m]"


@dataclass(frozen=True)
class Panel:
    """A panel: its title, its queries (PromQL, legend) and how to show it."""

    title: str
    queries: tuple[tuple[str, str], ...]
    unit: str = "short"
    stat: bool = False
    description: str = ""


def p99(histogram: str, by: str = "", q: str = "0.99") -> str:
    labels = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({histogram}_bucket{RATE})))"


def rpc_panels(job: str) -> list[Panel]:
    """What every gRPC service shows: calls, latency and errors by method and code."""
    selector = f'job="{job}"'
    return [
        Panel(
            "Calls/s by method",
            (
                (
                    f"sum by (grpc_method) (rate(grpc_server_handled_total{{{selector}}}{RATE}))",
                    "{{grpc_method}}",
                ),
            ),
            unit="reqps",
        ),
        Panel(
            "p99 latency by method",
            (
                (
                    "histogram_quantile(0.99, sum by (le, grpc_method) "
                    f"(rate(grpc_server_handling_seconds_bucket{{{selector}}}{RATE})))",
                    "{{grpc_method}}",
                ),
            ),
            unit="s",
        ),
        Panel(
            "Errors by code",
            (
                (
                    "sum by (grpc_method, grpc_code) (rate(grpc_server_handled_total"
                    f'{{{selector}, grpc_code!="OK"}}{RATE}))',
                    "{{grpc_method}} {{grpc_code}}",
                ),
            ),
            unit="reqps",
        ),
        Panel(
            "CPU by instance",
            (
                (
                    f"sum by (instance) (rate(process_cpu_seconds_total{{{selector}}}{RATE}))",
                    "{{instance}}",
                ),
            ),
            unit="percentunit",
        ),
        Panel(
            "Resident memory by instance",
            (
                (
                    f"sum by (instance) (process_resident_memory_bytes{{{selector}}})",
                    "{{instance}}",
                ),
            ),
            unit="bytes",
        ),
    ]


def loop_panels(job: str) -> list[Panel]:
    selector = f'job="{job}"'
    return [
        Panel(
            "Background loop runs/s",
            (
                (
                    f"sum by (loop, outcome) (rate(masa_loop_runs_total{{{selector}}}{RATE}))",
                    "{{loop}} {{outcome}}",
                ),
            ),
            unit="ops",
        ),
        Panel(
            "Background loop p99",
            (
                (
                    "histogram_quantile(0.99, sum by (le, loop) "
                    f"(rate(masa_loop_run_seconds_bucket{{{selector}}}{RATE})))",
                    "{{loop}}",
                ),
            ),
            unit="s",
        ),
    ]


def consumer_panels(job: str) -> list[Panel]:
    selector = f'job="{job}"'
    return [
        Panel(
            "JetStream messages/s",
            (
                (
                    "sum by (consumer, outcome) "
                    f"(rate(masa_bus_messages_total{{{selector}}}{RATE}))",
                    "{{consumer}} {{outcome}}",
                ),
            ),
            unit="ops",
        ),
        Panel(
            "JetStream consumer lag",
            ((f"max by (consumer) (masa_bus_consumer_pending{{{selector}}})", "{{consumer}}"),),
        ),
    ]


OVERVIEW = [
    Panel("Tables online", (("sum(masa_tables_active)", "tables"),), stat=True),
    Panel("Players online", (("sum(masa_players_online)", "players"),), stat=True),
    Panel("Chips in escrow", (("sum(masa_ledger_chips_in_escrow)", "chips"),), stat=True),
    Panel(
        "Actions/s",
        ((f"sum(rate(masa_table_action_seconds_count{RATE}))", "actions"),),
        unit="ops",
    ),
    Panel("Action p99", ((p99("masa_table_action_seconds"), "p99"),), unit="s"),
    Panel(
        "Matchmaking wait p50 and p99 by lobby",
        (
            (p99("masa_matchmaking_wait_seconds", "lobby", "0.5"), "p50 {{lobby}}"),
            (p99("masa_matchmaking_wait_seconds", "lobby"), "p99 {{lobby}}"),
        ),
        unit="s",
    ),
    Panel(
        "Queue depth by lobby",
        (("sum by (lobby) (masa_matchmaking_queue_depth)", "{{lobby}}"),),
    ),
    Panel(
        "Settlements/s",
        ((f"sum(rate(masa_ledger_settlement_seconds_count{RATE}))", "settlements"),),
        unit="ops",
    ),
    Panel(
        "Errors by service and code",
        (
            (
                f'sum by (job, grpc_code) (rate(grpc_server_handled_total{{grpc_code!="OK"}}{RATE}))',
                "{{job}} {{grpc_code}}",
            ),
        ),
        unit="reqps",
    ),
]

ENGINE = [
    Panel("Tables in progress by game", (("sum by (game) (masa_tables_active)", "{{game}}"),)),
    Panel(
        "Actions/s by result",
        (
            (
                f"sum by (game, result) (rate(masa_table_actions_total{RATE}))",
                "{{game}} {{result}}",
            ),
        ),
        unit="ops",
    ),
    Panel(
        "Action and persist p99",
        (
            (p99("masa_table_action_seconds"), "action"),
            (p99("masa_table_persist_seconds"), "JetStream append"),
        ),
        unit="s",
    ),
    Panel(
        "Timeouts/s and autopilot seats",
        (
            (f"sum(rate(masa_table_timeouts_total{RATE}))", "timeouts/s"),
            ("sum(masa_autopilot_seats)", "autopilot seats"),
        ),
    ),
    Panel(
        "Frozen and overdue tables by node",
        (
            ("max by (instance) (masa_tables_frozen)", "frozen {{instance}}"),
            ("max by (instance) (masa_tables_overdue)", "overdue {{instance}}"),
        ),
    ),
    Panel("Players online by node", (("sum by (instance) (masa_players_online)", "{{instance}}"),)),
    Panel(
        "Results waiting in the outbox by node",
        (("max by (instance) (masa_outbox_pending_results)", "{{instance}}"),),
    ),
    Panel(
        "Result publishes/s by outcome and takeovers/s by reason",
        (
            (f"sum by (outcome) (rate(masa_outbox_publishes_total{RATE}))", "publish {{outcome}}"),
            (f"sum by (reason) (rate(masa_table_takeovers_total{RATE}))", "takeover {{reason}}"),
        ),
        unit="ops",
    ),
    Panel(
        "Tables recovery skipped (1h)",
        (
            (
                "sum by (reason) (increase(masa_table_recovery_skipped_total[1h]))",
                "{{reason}}",
            ),
        ),
    ),
]

BOT = [
    Panel(
        "Decisions/s by game and level",
        (
            (
                f"sum by (game, level) (rate(masa_bot_decisions_total{RATE}))",
                "{{game}} {{level}}",
            ),
        ),
        unit="ops",
    ),
    Panel(
        "Decision p99 by game",
        ((p99("masa_bot_decision_seconds", "game"), "{{game}}"),),
        unit="s",
    ),
]

# The web gateway serves HTTP, not gRPC: its own calls by browser protocol, and its services.
GATEWAY = [
    Panel(
        "Calls/s by method and protocol",
        (
            (
                f"sum by (grpc_method, protocol) (rate(masa_gateway_handled_total{RATE}))",
                "{{grpc_method}} {{protocol}}",
            ),
        ),
        unit="reqps",
    ),
    Panel(
        "p99 latency by method (gateway and service)",
        ((p99("masa_gateway_handling_seconds", "grpc_method"), "{{grpc_method}}"),),
        unit="s",
    ),
    Panel(
        "Refusals/s by code",
        (
            (
                f'sum by (grpc_code) (rate(masa_gateway_handled_total{{grpc_code!="OK"}}{RATE}))',
                "{{grpc_code}}",
            ),
        ),
        unit="reqps",
    ),
    Panel(
        "Streams open",
        (("sum by (grpc_method) (masa_gateway_streams_open)", "{{grpc_method}}"),),
    ),
    Panel(
        "Services answering SERVING",
        (("min(masa_gateway_upstream_up)", "all up"),),
        stat=True,
        description="0 while any service the gateway forwards to fails its health check.",
    ),
    Panel(
        "Pages, tokens, health and CORS/s",
        (
            (
                f"sum by (kind, status) (rate(masa_gateway_http_requests_total{RATE}))",
                "{{kind}} {{status}}",
            ),
        ),
        unit="reqps",
    ),
    Panel(
        "CPU by instance",
        (
            (
                f'rate(process_cpu_seconds_total{{job="masa-web-gateway"}}{RATE})',
                "{{instance}}",
            ),
        ),
        unit="percentunit",
    ),
]

LEDGER = [
    Panel(
        "Writes/s by kind and result",
        (
            (
                f"sum by (kind, result) (rate(masa_ledger_transfers_total{RATE}))",
                "{{kind}} {{result}}",
            ),
        ),
        unit="ops",
    ),
    Panel("Settlement p99", ((p99("masa_ledger_settlement_seconds"), "p99"),), unit="s"),
    Panel("Outbox lag", (("max(masa_ledger_outbox_lag_seconds)", "oldest unpublished"),), unit="s"),
    Panel(
        "Invariant violations by check",
        (("max by (check) (masa_ledger_invariant_violations)", "{{check}}"),),
    ),
    Panel("Chips in escrow", (("sum(masa_ledger_chips_in_escrow)", "chips"),)),
    Panel(
        "Holds expired/s",
        ((f"sum(rate(masa_ledger_holds_expired_total{RATE}))", "holds"),),
        unit="ops",
    ),
    Panel(
        "Seconds since the last invariant check",
        (("time() - max(masa_ledger_last_check_timestamp_seconds)", "age"),),
        unit="s",
    ),
]

MATCHMAKING = [
    Panel(
        "Queue depth by lobby",
        (("sum by (lobby) (masa_matchmaking_queue_depth)", "{{lobby}}"),),
    ),
    Panel(
        "Seated/s and rounds/s by lobby",
        (
            (f"sum by (lobby) (rate(masa_matchmaking_matched_total{RATE}))", "seated {{lobby}}"),
            (f"sum by (lobby) (rate(masa_matchmaking_rounds_total{RATE}))", "rounds {{lobby}}"),
        ),
        unit="ops",
    ),
    Panel(
        "Wait p50 and p99 by lobby",
        (
            (p99("masa_matchmaking_wait_seconds", "lobby", "0.5"), "p50 {{lobby}}"),
            (p99("masa_matchmaking_wait_seconds", "lobby"), "p99 {{lobby}}"),
        ),
        unit="s",
    ),
    Panel(
        "Round p99 by lobby",
        ((p99("masa_matchmaking_round_seconds", "lobby"), "{{lobby}}"),),
        unit="s",
    ),
    Panel(
        "Rating spread p50 by lobby",
        ((p99("masa_matchmaking_rating_spread", "lobby", "0.5"), "{{lobby}}"),),
    ),
    Panel(
        "Placement failures/s by reason",
        (
            (
                f"sum by (reason) (rate(masa_matchmaking_placement_failures_total{RATE}))",
                "{{reason}}",
            ),
        ),
        unit="ops",
    ),
]


def dashboard(uid: str, title: str, panels: list[Panel]) -> Dashboard:
    """Stats a third of the row wide, time series half; laid out left to right, top down."""
    built = []
    x = y = 0
    for panel in panels:
        width = 8 if panel.stat else 12
        if x + width > 24:
            x, y = 0, y + 8
        common = {
            "title": panel.title,
            "description": panel.description,
            "dataSource": DATASOURCE,
            "targets": [
                Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + n))
                for n, (expr, legend) in enumerate(panel.queries)
            ],
            "gridPos": GridPos(h=8, w=width, x=x, y=y),
        }
        built.append(
            Stat(**common, format=panel.unit)
            if panel.stat
            else TimeSeries(**common, unit=panel.unit)
        )
        x += width
    return Dashboard(
        title=title, uid=uid, tags=["masa"], timezone="utc", panels=built
    ).auto_panel_ids()


def dashboards() -> dict[str, Dashboard]:
    """Every dashboard by file name."""

    def service(job: str, specific: list[Panel], *, loops: bool, consumers: bool) -> list[Panel]:
        return [
            *specific,
            *rpc_panels(job),
            *(loop_panels(job) if loops else []),
            *(consumer_panels(job) if consumers else []),
        ]

    return {
        "overview": dashboard("masa-overview", "masa / overview", OVERVIEW),
        "table-engine": dashboard(
            "masa-table-engine",
            "masa / table-engine",
            service("masa-table-engine", ENGINE, loops=True, consumers=False),
        ),
        "matchmaking": dashboard(
            "masa-matchmaking",
            "masa / matchmaking",
            service("masa-matchmaking", MATCHMAKING, loops=True, consumers=True),
        ),
        "ledger": dashboard(
            "masa-ledger",
            "masa / ledger",
            service("masa-ledger", LEDGER, loops=True, consumers=True),
        ),
        "bot": dashboard(
            "masa-bot", "masa / bot", service("masa-bot", BOT, loops=False, consumers=False)
        ),
        "web-gateway": dashboard("masa-web-gateway", "masa / web-gateway", GATEWAY),
    }


def rendered() -> dict[str, str]:
    """Each dashboard's JSON model, as the checked-in file holds it."""
    return {
        f"{name}.json": json.dumps(
            board.to_json_data(), cls=DashboardEncoder, indent=2, sort_keys=True
        )
        + "\n"
        for name, board in dashboards().items()
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, text in rendered().items():
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name}", file=sys.stderr)


if __name__ == "__main__":
    main()
