"""Analytics: the gateway's message, delivery, task and usage events in ClickHouse (chDB embedded
by default, a ClickHouse server by configuration), the queries the API and console run on them.
"""
