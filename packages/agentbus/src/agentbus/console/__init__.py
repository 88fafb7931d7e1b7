"""The operators' console: server-rendered pages for a tenant's owners and admins, charts as
SVG, live counts by server-sent events, sign-in by one-time link and session cookie."""
