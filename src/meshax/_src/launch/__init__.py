"""The `meshax` command line and the local multi-process launcher."""
