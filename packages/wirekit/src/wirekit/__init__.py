"""Wire formats shared by servers and agents.

This package depends on nothing outside the standard library, so light agent packages can
import it without pulling in the server stack.
"""

from wirekit.canonical import canonical_hash, canonical_json, canonical_json_parsed

__all__ = ["canonical_hash", "canonical_json", "canonical_json_parsed"]
