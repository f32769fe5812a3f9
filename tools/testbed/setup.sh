#!/usr/bin/env bash
# Installs the training dependencies of the testbed trainer (tools/testbed/train.py).
# Debian's torch is built for /usr/bin/python3 (not a pyenv python on PATH).
# libopenblas0-pthread matters: without it torch falls back to the reference BLAS (~35x slower).
# Training is never part of the test run or CI; this script is only for regenerating the model.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends python3-torch libopenblas0-pthread python3-numpy
/usr/bin/python3 -c 'import torch; print("torch", torch.__version__)'
