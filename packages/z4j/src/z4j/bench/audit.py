"""``z4j bench audit``: reading and exporting a long audit log through the API.

Loads N audit rows straight into PostgreSQL (generate_series: 20 projects, 50 actors, a dozen
actions, one rare, spread over 90 days; the chain columns are filler, as the reads never check
them), signs in as the brain administrator and times ``GET /api/v1/audit`` pages with the
filters the page offers, then one whole ``/api/v1/audit/export`` with the server's memory
before and after.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from typing import Any

import httpx
import psycopg
from platformkit.testing.oversize import tree_rss_kb

from z4j.bench.harness import bench_brain, pct, timed

EMAIL, PASSWORD = "bench@example.com", "bench-password-1"
PROJECTS = [uuid.UUID(int=0x0190_0000_0000_7000_8000_0000_0000_0000 + i) for i in range(20)]
ACTORS = [uuid.UUID(int=0x0190_0000_0000_7000_8000_0000_0001_0000 + i) for i in range(50)]
ACTIONS = ["auth.login", "auth.logout", "member.add", "member.role_change", "member.remove",
           "invitation.create", "invitation.revoke", "agent.create", "api_key.create",
           "api_key.revoke", "password.change", "project.create"]  # fmt: skip
RARE = "agent.delete"  # one row in 5,000

_LOAD = """
INSERT INTO audit_log (id, ts, actor_user_id, project_id, action, target_type, target_id,
                       details, row_hmac, prev_row_hmac)
SELECT uuidv7(-(((%(total)s - g) * %(spread)s) * interval '1 second')),
       now() - ((%(total)s - g) * %(spread)s) * interval '1 second',
       (%(actors)s::uuid[])[1 + (g * 7919) %% 50],
       (%(projects)s::uuid[])[1 + (g * 104729) %% 20],
       CASE WHEN g %% 5000 = 0 THEN %(rare)s ELSE (%(actions)s::text[])[1 + (g * 31) %% 12] END,
       'user', gen_random_uuid(), jsonb_build_object('n', g, 'email', 'u' || g || '@example.com'),
       md5(g::text) || md5((g + 1)::text), md5((g - 1)::text) || md5(g::text)
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
"""


def load(admin_url: str, n: int, chunk: int = 200_000) -> float:
    began = time.perf_counter()
    spread = 90 * 86400 / max(n, 1)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for i, project in enumerate(PROJECTS):
            conn.execute(
                "INSERT INTO projects (id, name) VALUES (%s, %s)", (project, f"bench-{i:02d}")
            )
        for lo in range(1, n + 1, chunk):
            hi = min(n, lo + chunk - 1)
            conn.execute(
                _LOAD,
                {"total": n, "spread": spread, "actors": ACTORS, "projects": PROJECTS,
                 "actions": ACTIONS, "rare": RARE, "lo": lo, "hi": hi},
            )  # fmt: skip
            print(f"loaded {hi:,}/{n:,} audit rows", file=sys.stderr, flush=True)
        conn.execute("VACUUM ANALYZE audit_log")
    return time.perf_counter() - began


async def run(rows: int, requests: int, database_url: str | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    async with bench_brain(
        database_url, env={"Z4J_ADMIN_EMAIL": EMAIL, "Z4J_ADMIN_PASSWORD": PASSWORD}
    ) as server:
        load_seconds = load(server.admin_url, rows)
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
            r = await client.post("/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD})
            r.raise_for_status()
            first = (await client.get("/api/v1/audit", params={"limit": 50})).json()
            cases: dict[str, dict[str, Any]] = {
                "newest": {},
                "page2": {"before": first["next_before"]},
                "project": {"project_id": str(PROJECTS[3])},
                "actor": {"actor": str(ACTORS[7])},
                "action_prefix": {"action": "member."},
                "rare_action": {"action": RARE},
                "project+actor": {"project_id": str(PROJECTS[3]), "actor": str(ACTORS[7])},
            }
            for name, params in cases.items():
                times, resp = await timed(client, "/api/v1/audit", {"limit": 50, **params},
                                          requests)  # fmt: skip
                results.append(
                    {"benchmark": "z4j.audit", "case": name, "rows": rows, "requests": requests,
                     "p50_ms": pct(times, 0.5), "p95_ms": pct(times, 0.95),
                     "mean_ms": round(statistics.mean(times) * 1000, 2),
                     "items": len(resp.json()["items"]), "unit": "ms"}
                )  # fmt: skip
            assert server.proc is not None
            rss_before = tree_rss_kb(server.proc.pid)
            peak, lines, size = rss_before, 0, 0
            began = time.perf_counter()
            async with client.stream("GET", "/api/v1/audit/export") as stream:
                async for chunk in stream.aiter_bytes():
                    size += len(chunk)
                    lines += chunk.count(b"\n")
                    if lines % 50_000 < chunk.count(b"\n") + 1:
                        peak = max(peak, tree_rss_kb(server.proc.pid))
            seconds = time.perf_counter() - began
            peak = max(peak, tree_rss_kb(server.proc.pid))
        results.append(
            {"benchmark": "z4j.audit", "case": "export", "rows": rows, "lines": lines,
             "seconds": round(seconds, 2), "rows_per_s": round(lines / seconds),
             "mib": round(size / 2**20, 1), "server_rss_before_mib": round(rss_before / 1024, 1),
             "server_rss_peak_mib": round(peak / 1024, 1), "load_seconds": round(load_seconds, 1),
             "path": "HTTP GET JSON Lines (session cookie) <- server-side cursor"}
        )  # fmt: skip
    return results
