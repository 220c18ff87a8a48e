"""The multi-host test tier: simulated hosts made of Linux namespaces on one machine (hosts.py)."""
