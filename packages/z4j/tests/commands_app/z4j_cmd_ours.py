"""Command-test workers with our agent (``celery -A z4j_cmd_ours worker``)."""

from __future__ import annotations

from z4j_agent.celery import install
from z4j_cmd_app import make_app

app = make_app()
install(app)
