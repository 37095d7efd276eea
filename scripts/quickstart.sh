#!/usr/bin/env bash
# Installs (scripts/install.sh), then runs the main job on the embedded default: a search on scikit-learn's
# digits with a small CNN (pointwise_cnn), tracked in ./mlflow.db (artifacts in ./mlruns) with the study in ./syno.db.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
syno-automl search "$@"
