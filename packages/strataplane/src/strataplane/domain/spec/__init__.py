"""The spec files: canonical form, paths, kinds and their fields, selectors, versions,
validation of a tree, and composition of an agent's configuration (spec-format.md)."""
