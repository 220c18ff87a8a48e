"""Interpreters of the core: each one a Trace with its own rule table."""
