"""The invariant check: ``masa-ledger check`` once, and the service periodically.

It verifies that balances sum to zero and match their transfers, that no wallet or escrow is
negative, that every escrow equals the holds bound to it, that no game is settled twice and
that no hold is both posted and voided (the queries are in the store). The report is JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from masa_ledger.app.ports import Store

__all__ = ["CheckReport", "run_check"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    # Every check by name: how many rows break it, and up to 20 of them.
    counts: Mapping[str, int]
    examples: Mapping[str, Sequence[str]]
    totals: Mapping[str, int]

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": {
                name: {
                    "ok": count == 0,
                    "violations": count,
                    "examples": list(self.examples.get(name, ())),
                }
                for name, count in self.counts.items()
            },
            "totals": dict(self.totals),
        }


async def run_check(store: Store) -> CheckReport:
    facts = await store.check()
    return CheckReport(counts=facts.counts, examples=facts.examples, totals=facts.totals)
