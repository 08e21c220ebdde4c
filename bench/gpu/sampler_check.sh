#!/usr/bin/env bash
# The sampler check on the GPU machine (see sampler_check.py). Here: bash bench/gpu/wheels.sh; there:
# bash bench/gpu/sampler_check.sh (writes $OUT/sampler_check.json and the machine's nvidia-smi).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,power.draw,power.limit,utilization.gpu --format=csv > "${OUT:-/tmp}/machine.csv" 2>&1
python3 bench/gpu/sampler_check.py "${OUT:-/tmp}/sampler_check.json"
