from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from agentbus_sidecar import clock
from agentbus_sidecar.ids import (
    id_time,
    new_id,
    parse_id,
    request_msg_id_for,
    restart_ids,
    task_id_for,
)

ID = re.compile(r"^msg_[0-9a-f]{32}$")


def test_ids_have_the_prefixed_form_and_are_uuid7() -> None:
    value = new_id("msg")
    assert ID.match(value)
    parsed = parse_id(value, "msg", client_minted=True)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert value[4:] == str(parsed).replace("-", "")
    assert len(new_id("ws")) == 35


def test_ids_strictly_increase_within_a_process() -> None:
    ids = [new_id("msg") for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_id_time_is_the_corrected_clock() -> None:
    slack = timedelta(seconds=2)  # the rule is about an hour; a busy machine's clock reads drift
    before = clock.utcnow() - slack
    assert before <= id_time(new_id("cnv")) <= clock.utcnow() + slack
    clock.set_server_offset_ms(3_600_000)
    try:
        ahead = id_time(new_id("msg")) - clock.utcnow()
    finally:
        clock.set_server_offset_ms(0)
    assert timedelta(minutes=59) < ahead < timedelta(minutes=61)
    assert id_time(new_id("msg")) > clock.utcnow() + timedelta(minutes=59), "ids never go back"
    restart_ids()  # or every later id of this process would stay an hour ahead
    assert id_time(new_id("msg")) <= clock.utcnow() + slack


@pytest.mark.parametrize(
    "text",
    [
        "msg_01A12F72923B7C4D9E8F0A1B2C3D4E5F",
        "msg_01a12f72-923b-7c4d-9e8f-0a1b2c3d4e5f",
        "cnv_01a12f72923b7c4d9e8f0a1b2c3d4e5f",
        "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5",
        "01a12f72923b7c4d9e8f0a1b2c3d4e5f",
    ],
)
def test_parsing_is_strict(text: str) -> None:
    with pytest.raises(ValueError, match="not a msg_ id"):
        parse_id(text, "msg")


def test_client_minted_ids_must_be_version_7() -> None:
    v4 = "msg_" + uuid.uuid4().hex
    assert parse_id(v4, "msg").version == 4
    with pytest.raises(ValueError, match="UUIDv7"):
        parse_id(v4, "msg", client_minted=True)


def test_task_ids_share_the_request_uuid() -> None:
    msg = "msg_01a12f72923b7c4d9e8f0a1b2c3d4e5f"
    assert task_id_for(msg) == "tsk_01a12f72923b7c4d9e8f0a1b2c3d4e5f"
    assert request_msg_id_for(task_id_for(msg)) == msg
