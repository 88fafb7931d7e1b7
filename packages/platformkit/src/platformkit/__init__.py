"""Shared server kernel for strataplane, z4j and AgentBus."""
