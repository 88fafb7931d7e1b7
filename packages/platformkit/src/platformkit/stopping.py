"""Stopping a command-line tool by SIGTERM or SIGHUP the way Ctrl-C stops it.

Python ends a process on SIGTERM or SIGHUP at once, without running ``finally`` blocks, so a
command that started servers of its own (an embedded PostgreSQL or NATS, the system servers of
``stack up``, a benchmark's throwaway database) would leave them running when ``kill``,
``timeout``, a service manager or a closed terminal stops it. After :func:`stop_like_ctrl_c`
those signals raise ``KeyboardInterrupt`` in the main thread, as SIGINT does, so the command's
own cleanup runs. Code that installs its own handlers (``platformkit.http.serve``) still does so
for its duration, and a signal the process was started ignoring (``nohup``) stays ignored.
"""

from __future__ import annotations

import signal

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def stop_like_ctrl_c() -> None:
    """Make SIGTERM and SIGHUP raise ``KeyboardInterrupt``, where they still end the process."""
    for sig in STOPPING_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, signal.default_int_handler)
