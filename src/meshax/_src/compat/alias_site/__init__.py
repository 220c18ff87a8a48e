"""A directory that `python -m meshax.as_jax` puts first on PYTHONPATH: its sitecustomize.py carries the jax alias
into every Python process the program starts."""
