"""The schedule rules as properties: cron matching on a zone's wall clock, intervals, dates, and
the claim that lets one beat win each slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from z4j.domain import cron
from z4j.domain import schedules as rules

ZONES = st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"])
INSTANTS = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC)
)


def _part(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.integers(1, 20).map(lambda n: f"*/{n}"),
        st.lists(value, min_size=1, max_size=3).map(lambda vs: ",".join(map(str, vs))),
    )


EXPRESSIONS = st.tuples(_part(0, 59), _part(0, 23), _part(1, 28), _part(1, 12), _part(0, 7)).map(
    " ".join
)


def _matches(rule: cron.Cron, local: datetime) -> bool:
    return (
        local.minute in rule.minutes and local.hour in rule.hours and rule.day_matches(local.date())
    )


@given(EXPRESSIONS, INSTANTS, ZONES)
def test_the_next_cron_run_matches_and_none_is_skipped(
    expression: str, after: datetime, zone_name: str
) -> None:
    zone = ZoneInfo(zone_name)
    rule = cron.parse(expression)
    found = cron.next_after(rule, after, zone)
    assert found is not None  # days 1-28 exist in every month: it matches some day
    assert found > after
    assert _matches(rule, found.astimezone(zone))
    # Every minute between (checked over at most two days) is not a match.
    minute = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    limit = min(found, after + timedelta(days=2))
    while minute < limit:
        local = minute.astimezone(zone)
        if _matches(rule, local) and local.fold == 0:
            raise AssertionError(f"{expression} matched {minute} before {found}")
        minute += timedelta(minutes=1)


@pytest.mark.parametrize(
    "expression",
    ["60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "5-1 * * * *",
     "* * * *", "a * * * *", "*/0 * * * *", "\uff11 * * * *"],
)  # fmt: skip
def test_bad_cron_expressions_are_refused(expression: str) -> None:
    with pytest.raises(cron.CronInvalid):
        cron.parse(expression)


def test_names_vixie_day_rules_and_impossible_dates() -> None:
    paris = ZoneInfo("Europe/Paris")
    start = datetime(2027, 3, 1, tzinfo=UTC)  # a Monday
    weekdays = cron.parse("0 9 * jan-dec mon-fri")
    assert cron.next_after(weekdays, start, paris) == datetime(2027, 3, 1, 8, tzinfo=UTC)
    # both day fields restricted: either matches (the 15th, or a Sunday)
    either = cron.parse("0 0 15 * sun")
    assert cron.next_after(either, start, UTC) == datetime(2027, 3, 7, tzinfo=UTC)
    assert cron.next_after(cron.parse("0 0 30 2 *"), start, UTC) is None
    leap = cron.next_after(cron.parse("0 0 29 2 *"), start, UTC)
    assert leap == datetime(2028, 2, 29, tzinfo=UTC)


def test_daylight_saving_skips_the_missing_time_and_fires_a_repeated_one_once() -> None:
    paris = ZoneInfo("Europe/Paris")
    at_0230 = cron.parse("30 2 * * *")
    # 2027-03-28: clocks go from 02:00 to 03:00 in Paris; there is no 02:30 that day.
    found = cron.next_after(at_0230, datetime(2027, 3, 27, 12, tzinfo=UTC), paris)
    assert found == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)
    # 2027-10-31: 02:30 happens twice; it fires at the first.
    first = cron.next_after(at_0230, datetime(2027, 10, 30, 12, tzinfo=UTC), paris)
    assert first == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)
    after = cron.next_after(at_0230, first, paris)
    assert after == datetime(2027, 11, 1, 1, 30, tzinfo=UTC)


@given(st.integers(0, 400), st.integers(0, 59), st.integers(0, 59))
def test_intervals_add_up_their_parts(hours: int, minutes: int, seconds: int) -> None:
    text = f"{hours}h{minutes}m{seconds}s"
    total = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if rules.MIN_INTERVAL <= total <= rules.MAX_INTERVAL:
        assert rules.parse_interval(text) == total
    else:
        with pytest.raises(rules.ScheduleInvalid):
            rules.parse_interval(text)


@given(st.sampled_from(["1s", "90", "5m", "1d", "1h30m"]), INSTANTS, INSTANTS)
def test_a_claim_wins_only_the_current_slot_and_moves_it_on(
    expression: str, slot: datetime, now: datetime
) -> None:
    spec = rules.timing("interval", expression)
    row = {"enabled": True, "next_run_at": slot, "metadata": {}}
    won = rules.claim(row, spec, slot, now)
    if slot > now:
        assert won is None
        return
    assert won is not None
    assert won.last_run_at == now
    assert won.next_run_at == now + rules.parse_interval(expression)
    # the row as the winner left it: the same slot claimed again loses
    assert (
        rules.claim(
            {"enabled": True, "next_run_at": won.next_run_at, "metadata": {}}, spec, slot, now
        )
        is None
    )
    assert (
        rules.claim({"enabled": False, "next_run_at": None, "metadata": {}}, spec, slot, now)
        is None
    )


def test_a_date_runs_once_on_its_zone() -> None:
    spec = rules.timing("date", "2030-06-01T09:00", "Europe/Paris")
    assert spec.at == datetime(2030, 6, 1, 7, tzinfo=UTC)
    now = datetime(2030, 6, 1, 8, tzinfo=UTC)
    won = rules.claim({"enabled": True, "next_run_at": spec.at, "metadata": {}}, spec, spec.at, now)
    assert won is not None
    assert won.next_run_at is None
    with pytest.raises(rules.ScheduleInvalid):
        rules.first_run(spec, now, None)


@given(st.sampled_from([None, "pending", "started", "retried", "succeeded", "failed", "lost"]),
       st.booleans(), st.booleans(), st.integers(1, 120))  # fmt: skip
def test_a_run_is_skipped_only_while_the_last_one_is_unfinished_and_asked_to(
    previous: str | None, skip_if_running: bool, sent_before: bool, ago: int
) -> None:
    spec = rules.timing("interval", "10s")
    slot = datetime(2030, 1, 1, tzinfo=UTC)
    now = slot + timedelta(seconds=1)
    last = now - timedelta(seconds=ago)
    meta: dict[str, object] = {"skip_if_running": skip_if_running}
    if sent_before:
        meta["last_task_id"] = "t-1"
    row = {"enabled": True, "next_run_at": slot, "last_run_at": last, "metadata": meta}
    won = rules.claim(row, spec, slot, now, previous if sent_before else None)
    assert won is not None
    assert won.next_run_at == now + timedelta(seconds=10)  # the slot is spent either way
    unseen_recent = sent_before and previous is None and ago < 60
    unfinished = sent_before and previous in {"pending", "started", "retried"}
    skipped = skip_if_running and (unfinished or unseen_recent)
    assert won.skip is skipped
    assert won.last_run_at == (last if skipped else now)
