#!/usr/bin/env bash
# Install into .venv and start the web calculator on http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/streamlit run app.py --server.port 8501 --server.address localhost \
  --server.fileWatcherType none --server.maxUploadSize 5 \
  --server.headless true --browser.gatherUsageStats false
