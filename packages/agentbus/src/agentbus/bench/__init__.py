"""The gateway benchmarks: ``agentbus-gateway bench`` (``command``) and ``bench-analytics``
(``analytics``), with the deployment, clients, meters and runs they share."""
