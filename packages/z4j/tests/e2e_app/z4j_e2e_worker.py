"""What the test workers load (``celery -A z4j_e2e_worker worker``): the app, plus the agent in
its two documented lines. The agent reads Z4J_BRAIN_URL, Z4J_TOKEN, Z4J_HMAC_SECRET and
Z4J_BUFFER_PATH from the environment the test gives the worker."""

from __future__ import annotations

import os

from z4j_agent.celery import install
from z4j_e2e_app import make_app

app = make_app(os.environ["Z4J_E2E_BROKER"], os.environ["Z4J_E2E_QUEUE"])
install(app)
