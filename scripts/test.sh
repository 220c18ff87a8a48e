#!/usr/bin/env bash
# Set up a venv with meshax and its test dependencies, check the built wheel (scripts/check_wheel.sh:
# build, twine check, install into a fresh venv, run the CLI and the demo from it), then run the test suite:
# the single-process tests in parallel on every core, then the tests that start processes one at a time
# (their time bounds assume the cores are theirs). Arguments go to pytest and run just those tests, in order.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
PYTHON=.venv/bin/python bash scripts/check_wheel.sh
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest -q "$@"
fi
.venv/bin/python -m pytest -q -n "$(nproc)" -m "not processes"
exec .venv/bin/python -m pytest -q -m processes
