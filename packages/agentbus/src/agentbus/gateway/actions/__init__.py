"""What the gateway does for a request or a background loop, in transactions over ``store``:
the send path (``send`` -> ``accept`` -> ``publish``, with ``receipts``, ``replay`` and
``reconciler``), registration and credentials, agents and their keys, conversations, blobs,
redrive, presence and administration."""
