"""strataplane's rules as pure functions: no I/O, no database, no HTTP.

``spec/`` owns the spec files (canonical form, paths, kinds, selectors, versions, validation,
composition); ``tree`` the tree hash and change-set digest; ``merge`` rebase, revert and
restore as overlays; ``approvals`` the approval requirements of a change set.
"""
