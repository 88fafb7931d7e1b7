"""The gateway service: the process (``app``, ``context``, ``config``, ``metrics``) and its
layers, ``domain`` (pure rules), ``store`` (SQL and the object store), ``actions`` (the work, in
transactions) and ``api`` (the HTTP edge)."""
