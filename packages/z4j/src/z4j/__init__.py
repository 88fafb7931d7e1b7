"""z4j brain: agents in Celery workers report task events; the brain keeps and shows them."""

__version__ = "0.1.0"
