"""HTTP routes: parse, call one action or read, render. No SQL and no rules here."""
