"""strataplane server: tenants, identity, the versioned spec and change sets."""

__version__ = "0.1.0"
