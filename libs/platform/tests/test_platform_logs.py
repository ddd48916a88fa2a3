from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from masa_platform.logs import bound_context, configure_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging("DEBUG", service="table-engine", stream=buffer)
    yield buffer
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def lines(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_each_record_is_one_json_object_per_line(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    log.info("table %s created", "t1", extra={"game": "fiftyone", "seats": 4})
    log.warning("multi\nline")
    first, second = lines(stream)
    assert first["msg"] == "table t1 created"
    assert first["level"] == "INFO"
    assert first["logger"] == "masa.test"
    assert first["service"] == "table-engine"
    assert first["game"] == "fiftyone"
    assert first["seats"] == 4
    assert str(first["ts"]).endswith("+00:00")
    assert second["msg"] == "multi\nline"


def test_bound_context_is_added_inside_the_block_only(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    with bound_context(table_id="t9", seat=2):
        log.info("inside")
    log.info("outside")
    inside, outside = lines(stream)
    assert inside["table_id"] == "t9"
    assert inside["seat"] == 2
    assert "table_id" not in outside


def test_exceptions_and_unencodable_values_are_still_json(stream: io.StringIO) -> None:
    log = logging.getLogger("masa.test")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed", extra={"value": object()})
    (entry,) = lines(stream)
    assert "RuntimeError: boom" in str(entry["exc"])
    assert str(entry["value"]).startswith("<object object")


def test_configuring_twice_does_not_duplicate_lines(stream: io.StringIO) -> None:
    second = io.StringIO()
    configure_logging("INFO", stream=second)
    logging.getLogger("masa.test").info("once")
    assert stream.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1
