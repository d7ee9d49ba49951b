#!/usr/bin/env bash
# Install into .venv (with test extras) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-tests
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
