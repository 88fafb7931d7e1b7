"""Command-test workers with the z4j-celery agent: importing it installs the agent."""

from __future__ import annotations

import z4j_celery  # noqa: F401 - importing it installs the agent
from z4j_cmd_app import make_app

app = make_app()
