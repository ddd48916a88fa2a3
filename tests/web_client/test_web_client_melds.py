"""The web client's meld check (clients/web/src/table/melds.ts) reads cards as the engine does.

The page says why a selection is no meld before it is sent (F-10..F-15) and offers a joker
both ends of a run only where the engine would take it at either (F-11, F-50). A check that
refused what the engine accepts would keep a player from a legal move, so the module is
bundled with the client's own esbuild and run by node on groups drawn from the real pack of
every preset, and each verdict, with its rule id, is compared with masa_rules.melds.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
from masa_rules.cards import PhysicalCard, fiftyone_pack
from masa_rules.fiftyone import TableMeld
from masa_rules.melds import MeldError, MeldKind, is_pair, layoff_options, readings
from masa_rules.ruleset import RuleSet
from masa_wire.cards import card_to_proto
from masa_wire.fiftyone.melds import meld_to_proto

WEB: Final = Path(__file__).resolve().parents[2] / "clients" / "web"
PRESETS: Final = ("salon", "classic", "remi")
RULE_ID: Final = re.compile(r"\(((?:F|C)-\d+)\)$")
RUNNER: Final = """
import { readFileSync } from "node:fs";
import { meldProblem, openEnds } from "./melds.mjs";
const asked = JSON.parse(readFileSync(0, "utf8"));
const groups = asked.groups.map(([cards, aceLow]) => meldProblem(cards, aceLow));
const runs = asked.runs.map(([meld, aceLow]) => openEnds(meld, aceLow));
process.stdout.write(JSON.stringify({ groups, runs }));
"""


@pytest.fixture(scope="module")
def client_melds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """melds.ts bundled for node, beside a runner that answers a JSON question on stdin."""
    esbuild = WEB / "node_modules" / ".bin" / "esbuild"
    assert esbuild.exists() and (WEB / "src" / "gen").is_dir(), "make setup builds the web client"
    out = tmp_path_factory.mktemp("web-melds")
    subprocess.run(
        [
            str(esbuild),
            "src/table/melds.ts",
            "--bundle",
            "--format=esm",
            "--platform=node",
            f"--outfile={out / 'melds.mjs'}",
            "--log-level=warning",
        ],
        cwd=WEB,
        check=True,
        timeout=60,
    )
    (out / "runner.mjs").write_text(RUNNER)
    return out


def ask(folder: Path, question: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is part of make setup"
    ran = subprocess.run(
        [node, str(folder / "runner.mjs")],
        input=json.dumps(question),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    answer: dict[str, Any] = json.loads(ran.stdout)
    return answer


def as_json(message: Any) -> dict[str, int]:
    """A proto card as the client's generated Card holds it (every field, defaults included)."""
    return {
        "rank": message.rank,
        "suit": message.suit,
        "jokerColour": message.joker_colour,
        "copy": message.copy,
    }


def groups(rng: random.Random, count: int) -> list[list[PhysicalCard]]:
    """Groups of 2 to 6 cards: near-runs, near-sets, ace-ends and any cards at all, so that
    valid and refused groups of every kind come up."""
    pack = list(fiftyone_pack())
    naturals = [card for card in pack if not card.card.is_joker]
    jokers = [card for card in pack if card.card.is_joker]
    out: list[list[PhysicalCard]] = []
    while len(out) < count:
        size = rng.randint(2, 6)
        shape = rng.random()
        if shape < 0.4:
            suit = rng.randrange(4)
            start = rng.randint(0, 13 - min(size, 13))
            chosen = [
                PhysicalCard(suit * 13 + (start + i) % 13, rng.randint(0, 1)) for i in range(size)
            ]
            if rng.random() < 0.5:
                # The ace (index 12 of a suit) with the low ranks: A 2 3 is a run only in remi.
                chosen = [PhysicalCard(suit * 13 + (12 + i) % 13, 0) for i in range(size)]
        elif shape < 0.7:
            rank = rng.randrange(13)
            suits = [rng.randrange(4) for _ in range(size)]
            chosen = [PhysicalCard(s * 13 + rank, i % 2) for i, s in enumerate(suits)]
        else:
            chosen = rng.sample(naturals, size)
        for _ in range(rng.choice((0, 0, 1, 2))):
            chosen[rng.randrange(len(chosen))] = rng.choice(jokers)
        if rng.random() < 0.2 and len(chosen) > 2:
            chosen.pop(rng.randrange(len(chosen)))
        if len(set(chosen)) == len(chosen):
            out.append(chosen)
    return out


def engine_verdict(cards: list[PhysicalCard], rules: RuleSet) -> str:
    """ "" when the engine takes the cards as a pair (two) or a meld, else the rule it names."""
    faces = [card.card for card in cards]
    if len(faces) == 2:
        return "" if is_pair(faces[0], faces[1], rules) else "F-15"
    try:
        readings(faces, rules)
    except MeldError as error:
        return error.rule
    return ""


@pytest.mark.parametrize("preset", PRESETS)
def test_F10_F15_the_client_refuses_exactly_the_groups_the_engine_refuses(
    client_melds: Path, preset: str
) -> None:
    rules = RuleSet.preset_named(preset)
    drawn = groups(random.Random(f"melds-{preset}"), 3000)
    answer = ask(
        client_melds,
        {
            "groups": [[[as_json(card_to_proto(c)) for c in g], rules.ace_low] for g in drawn],
            "runs": [],
        },
    )
    valid = 0
    for cards, said in zip(drawn, answer["groups"], strict=True):
        expected = engine_verdict(cards, rules)
        codes = [card.code for card in cards]
        if expected == "":
            valid += 1
            assert said == "", (codes, said)
        else:
            found = RULE_ID.search(said)
            assert found is not None and found.group(1) == expected, (codes, expected, said)
    # Both verdicts are common, so neither half of the comparison is empty.
    assert 300 < valid < 2700, valid


@pytest.mark.parametrize("preset", PRESETS)
def test_F11_F50_a_joker_is_offered_the_ends_of_a_run_the_engine_would_lay_it_at(
    client_melds: Path, preset: str
) -> None:
    rules = RuleSet.preset_named(preset)
    rng = random.Random(f"ends-{preset}")
    joker = next(card for card in fiftyone_pack() if card.card.is_joker)
    runs: list[TableMeld] = []
    for cards in groups(rng, 4000):
        faces = [card.card for card in cards]
        if len(faces) < 3 or joker in cards:
            continue
        try:
            found = readings(faces, rules)
        except MeldError:
            continue
        for meld in found:
            if meld.kind is MeldKind.RUN:
                # The physical cards in the reading's order, as the table keeps them.
                order = sorted(cards, key=lambda c: [p.card for p in meld.cards].index(c.card))
                runs.append(TableMeld(owner=0, meld=meld, cards=tuple(order)))
    assert len(runs) > 200
    question = [[_meld_json(run, rules), rules.ace_low] for run in runs]
    answer = ask(client_melds, {"groups": [], "runs": question})
    for run, said in zip(runs, answer["runs"], strict=True):
        options = layoff_options(run.meld, joker.card, rules)
        low = any(option.start < run.meld.start for option in options)
        high = any(option.start == run.meld.start for option in options)
        assert (said["low"], said["high"]) == (low, high), (str(run.meld), said)


def _meld_json(run: TableMeld, rules: RuleSet) -> dict[str, Any]:
    message = meld_to_proto(0, run, rules)
    return {
        "kind": message.kind,
        "cards": [
            {
                "card": as_json(placed.card),
                **(
                    {"standsFor": as_json(placed.stands_for)}
                    if placed.HasField("stands_for")
                    else {}
                ),
            }
            for placed in message.cards
        ],
    }
