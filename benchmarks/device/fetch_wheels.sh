#!/usr/bin/env bash
# Wheels for the 16-core device machine (Python 3.12, no network there) that its image lacks: the MPI library
# meshax's data plane loads (mpich), numexpr (integer chains on 4+ threads) and crc32c (meshax.checkpoint), into
# .whl/ at the repository's root, git-ignored. Its image already holds numpy, scipy, numba, llvmlite, mpi4py, jax,
# threadpoolctl, rich and ml_dtypes (llvmlite's wheel alone, 60 MB, would not fit the 64 MiB a call carries).
#     bash benchmarks/device/fetch_wheels.sh      # then: benchmarks/device/run_16_cores.sh, carrying .whl
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
for package in mpich==5.0.2 numexpr crc32c; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$package" 2>&1 | grep -v '^WARNING: Location' || true
done
ls -la .whl
