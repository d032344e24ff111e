#!/usr/bin/env bash
# The whole test suite, after installing what it needs. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# pytest caches its rewritten test modules only where bytecode may be written: one rewrite for all workers.
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n 3 --dist loadgroup --no-loadscope-reorder -p no:cacheprovider "$@"
