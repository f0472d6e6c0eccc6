#!/usr/bin/env bash
# The test command (README, .ci/run): set everything up, then run the whole suite.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/contrib/setup.sh"
cd "$REPO"
exec "${HPCPREDICT_VENV:-$REPO/.venv}/bin/python" -m pytest tests -q -p no:cacheprovider "$@"
