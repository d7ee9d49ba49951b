#!/usr/bin/env bash
# Create .venv and install perfmodel into it. Nothing global except Debian's chromium
# for the browser test (--with-tests, as root). Usage: scripts/setup.sh [--with-tests]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip >/dev/null
# torch: the CPU build on local disk; pinned so pip never resolves a multi-GB CUDA build.
$PIP install -q "torch==2.13.0"
if [ "${1:-}" = "--with-tests" ]; then
  # llama.cpp's server compiles from source (~5 min the first time; pip caches the wheel).
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" $PIP install -q -e ".[calibrate,dev,server]"
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
    else
      echo "note: chromium missing and not root: the browser test will be skipped" >&2
    fi
  fi
else
  $PIP install -q -e ".[calibrate]"
fi
