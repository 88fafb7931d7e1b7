"""The public API is deliberate: these lists change only with a conscious edit."""

from __future__ import annotations

import subprocess
import sys

import z4j_agent
import z4j_agent.celery
import z4j_agent.protocol
import z4j_agent.redaction

PUBLIC = [
    "AGENT_VERSION",
    "EVENT_KINDS",
    "REDACTED",
    "Agent",
    "AgentConfig",
    "ConfigError",
    "EventBuffer",
    "ProcessIdentity",
    "Transport",
    "__version__",
    "find_secrets",
    "load_config",
    "make_event",
    "new_event_id",
    "redact",
    "redact_event_data",
    "redact_text",
]


def test_package_api_is_locked() -> None:
    assert sorted(z4j_agent.__all__) == sorted(PUBLIC)
    for name in z4j_agent.__all__:
        assert getattr(z4j_agent, name) is not None


def test_module_apis_are_locked() -> None:
    import z4j_agent.beat

    assert z4j_agent.beat.__all__ == ["BrainScheduler"]
    assert z4j_agent.celery.__all__ == ["install", "uninstall"]
    assert sorted(z4j_agent.redaction.__all__) == [
        "REDACTED",
        "RedactionLimits",
        "TRUNCATED",
        "find_secrets",
        "is_redacted_json",
        "is_sensitive_key",
        "normalize_keys",
        "redact",
        "redact_text",
        "redacted_json_flags",
    ]
    assert "FrameVerifier" in z4j_agent.protocol.__all__


def test_the_brain_can_import_redaction_and_protocol_alone() -> None:
    code = (
        "import sys, z4j_agent.redaction, z4j_agent.protocol, z4j_agent.events;"
        "bad = [m for m in ('websockets', 'celery', 'z4j', 'platformkit') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
