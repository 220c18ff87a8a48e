#!/usr/bin/env bash
# Set up a venv with meshax and its test dependencies, check the built wheel (scripts/check_wheel.sh:
# build, twine check, install into a fresh venv, run the CLI and the demo from it), then run the test suite:
# the single-process tests in parallel on every core, then the tests that start processes one at a time
# (their time bounds assume the cores are theirs). Arguments go to pytest and run just those tests, in order.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test oracle, JAX 0.12, needs Python 3.12: take it where it exists (on PATH, or installed by pyenv).
python_for_tests() {
    if python3.12 -c '' 2>/dev/null; then echo python3.12; return; fi
    for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
        if [ -x "$candidate" ]; then echo "$candidate"; return; fi
    done
    echo python3
}
"$(python_for_tests)" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
PYTHON=.venv/bin/python bash scripts/check_wheel.sh
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest -q "$@"
fi
.venv/bin/python -m pytest -q -n "$(nproc)" -m "not processes"
exec .venv/bin/python -m pytest -q -m processes
