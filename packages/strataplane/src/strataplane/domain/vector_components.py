"""What Vector 0.57 accepts in a configuration it loads, for validation level 1 of Vector objects
(spec-format.md §4.6) while there is no catalog bundle for Vector.

The component types are the names registered with ``configurable_component(source(...))``,
``transform(...)`` and ``sink(...)`` in Vector's sources (test-only components left out); the
top-level keys are ``ConfigBuilder``'s, which refuses any other (``deny_unknown_fields``), and
``GLOBAL_OPTIONS`` are the fields of ``GlobalOptions``: a reload that changes one of them is
rejected and the old configuration keeps running (``restart_required``).
"""

from __future__ import annotations

__all__ = ["COMPONENT_TYPES", "GLOBAL_OPTIONS", "RESERVED", "TOP_LEVEL", "unknown_type"]

_SOURCES = """
amqp apache_metrics aws_ecs_metrics aws_kinesis_firehose aws_s3 aws_sqs datadog_agent demo_logs
dnstap docker_logs eventstoredb_metrics exec file file_descriptor fluent gcp_pubsub heroku_logs
host_metrics http http_client http_server internal_logs internal_metrics journald kafka
kubernetes_logs logstash mongodb_metrics mqtt nats nginx_metrics okta opentelemetry
postgresql_metrics prometheus_pushgateway prometheus_remote_write prometheus_scrape pulsar redis
socket splunk_hec static_metrics statsd stdin syslog vector websocket windows_event_log
"""
_TRANSFORMS = """
aggregate aws_ec2_metadata dedupe delay exclusive_route filter incremental_to_absolute
log_to_metric lua metric_to_log reduce remap route sample tag_cardinality_limit throttle
trace_to_log window
"""
_SINKS = """
amqp appsignal aws_cloudwatch_logs aws_cloudwatch_metrics aws_kinesis_firehose
aws_kinesis_streams aws_s3 aws_sns aws_sqs axiom azure_blob azure_logs_ingestion blackhole
clickhouse console databend databricks_zerobus datadog_events datadog_logs datadog_metrics
datadog_traces doris elasticsearch file gcp_chronicle_unstructured gcp_cloud_storage gcp_pubsub
gcp_stackdriver_logs gcp_stackdriver_metrics greptimedb greptimedb_logs greptimedb_metrics
honeycomb http humio_logs humio_metrics influxdb_logs influxdb_metrics kafka keep loki mezmo
mqtt nats new_relic opentelemetry papertrail postgres prometheus_exporter
prometheus_remote_write pulsar redis sematext_logs sematext_metrics socket splunk_hec_logs
splunk_hec_metrics statsd vector webhdfs websocket websocket_server
"""

COMPONENT_TYPES: dict[str, frozenset[str]] = {
    "sources": frozenset(_SOURCES.split()),
    "transforms": frozenset(_TRANSFORMS.split()),
    "sinks": frozenset(_SINKS.split()),
}
GLOBAL_OPTIONS = frozenset(
    [
        "data_dir",
        "wildcard_matching",
        "log_schema",
        "telemetry",
        "timezone",
        "proxy",
        "acknowledgements",
        "expire_metrics",
        "expire_metrics_secs",
        "expire_metrics_per_metric_set",
        "buffer_utilization_ewma_half_life_seconds",
        "latency_ewma_alpha",
        "metrics_storage_refresh_period",
    ]
)
# written by the renderer or by the host's bootstrap file, never by a spec object
RESERVED = frozenset(("provider", "secret"))
TOP_LEVEL = frozenset(
    (*GLOBAL_OPTIONS, *COMPONENT_TYPES, "api", "schema", "healthchecks", "enrichment_tables")
)


def unknown_type(section: str, component_type: object) -> str | None:
    """Why ``type`` cannot be a component of ``section``; None when Vector has it."""
    if not isinstance(component_type, str):
        return "a component needs its type, a string"
    if component_type in COMPONENT_TYPES[section]:
        return None
    return f"Vector 0.57 has no {section[:-1]} of type {component_type!r}"
