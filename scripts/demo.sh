#!/usr/bin/env bash
# Set up a venv with meshax, then run the seeds' toy example on 4 processes with 2 CPU devices each.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/meshax launch -n 4 --cpu-devices 2 examples/toy.py {process_id} {num_processes}
