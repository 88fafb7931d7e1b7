"""What the beat of the schedules' end-to-end test loads (``celery -A z4j_beat_app beat``): the
end-to-end app with the agent, plus a ``beat_schedule`` of its own, which the brain's scheduler
reports to the brain at start."""

from __future__ import annotations

import os
from datetime import timedelta

from celery.schedules import BaseSchedule, crontab
from z4j_agent.celery import install
from z4j_e2e_app import make_app


class OnPaydays(BaseSchedule):  # type: ignore[misc]  # celery has no type hints
    """A schedule class of the app's own: the brain has no such kind, so the beat skips it."""


queue = os.environ["Z4J_E2E_QUEUE"]
app = make_app(os.environ["Z4J_E2E_BROKER"], queue)
app.conf.beat_schedule = {
    "app-every-3s": {"task": "e2e.add", "schedule": timedelta(seconds=3), "args": (3, 4),
                     "options": {"queue": queue}},
    "app-weekday-mornings": {"task": "e2e.add", "schedule": crontab(minute="*/15", hour="9-17",
                             day_of_week="mon-fri"), "args": (0, 0)},
    "app-on-paydays": {"task": "e2e.add", "schedule": OnPaydays()},
}  # fmt: skip
install(app)
