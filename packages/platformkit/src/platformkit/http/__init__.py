"""The HTTP kernel shared by the three servers: app factory, problem+json errors, request ids,
health and readiness, Prometheus metrics, JSON logs, the request guard, Idempotency-Key, and
serving with granian.

See docs/platformkit/http.md for how a system uses it.
"""

from platformkit.http.app import add_readiness_check, create_app, install
from platformkit.http.fastresponse import FastJSONResponse
from platformkit.http.guard import DEFAULT_BODY_LIMIT, ContentTooLarge, RequestGuard
from platformkit.http.health import Readiness, ReadinessCheck, pool_check
from platformkit.http.idempotency import (
    REPLAYED_HEADER,
    Idempotency,
    IdempotencyKeyInProgress,
    IdempotencyKeyInvalid,
    IdempotencyKeyMismatch,
    IdempotencyKeyNotAccepted,
    IdempotencyKeyRequired,
    TenantScope,
    no_idempotency_key,
    rls_scope,
)
from platformkit.http.logs import configure_logging, logging_config
from platformkit.http.metrics import http_metrics
from platformkit.http.openapi import Problem, problem_responses
from platformkit.http.problems import (
    PROBLEM_MEDIA_TYPE,
    InternalError,
    NotReady,
    ProblemError,
    ValidationFailed,
    problem_body,
    problem_response,
)
from platformkit.http.requestid import current_request_id
from platformkit.http.serve import Server, serve, start_server

__all__ = [
    "DEFAULT_BODY_LIMIT",
    "PROBLEM_MEDIA_TYPE",
    "REPLAYED_HEADER",
    "ContentTooLarge",
    "FastJSONResponse",
    "Idempotency",
    "IdempotencyKeyInProgress",
    "IdempotencyKeyInvalid",
    "IdempotencyKeyMismatch",
    "IdempotencyKeyNotAccepted",
    "IdempotencyKeyRequired",
    "InternalError",
    "NotReady",
    "Problem",
    "ProblemError",
    "Readiness",
    "ReadinessCheck",
    "RequestGuard",
    "Server",
    "TenantScope",
    "ValidationFailed",
    "add_readiness_check",
    "configure_logging",
    "create_app",
    "current_request_id",
    "http_metrics",
    "install",
    "logging_config",
    "no_idempotency_key",
    "pool_check",
    "problem_body",
    "problem_response",
    "problem_responses",
    "rls_scope",
    "serve",
    "start_server",
]
