"""The module a test worker loads with ``celery -A z4j_test_worker``: the app plus the agent,
installed in the two documented lines."""

from __future__ import annotations

import os

from z4j_agent.celery import install
from z4j_test_app import make_app

app = make_app(os.environ["Z4J_TEST_BROKER"], os.environ["Z4J_TEST_QUEUE"])
install(app, worker_heartbeat_seconds=float(os.environ.get("Z4J_TEST_HEARTBEAT", "30")))
