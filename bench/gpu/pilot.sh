#!/usr/bin/env bash
# The pilot call on the GPU machine (see pilot.py). Usage there: bash bench/gpu/pilot.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
W=/tmp/pilot; mkdir -p $W
{ python3 -c 'import torch, transformers, sys; print(sys.version); print(torch.__version__, transformers.__version__)';
  nvidia-smi; nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,power.draw,power.limit,compute_cap,utilization.gpu --format=csv;
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv; nvidia-smi -q -d POWER | head -40; nproc; free -g; } > $W/machine.txt 2>&1
COLUMNS=120 transformers serve --help > $W/serve-help.txt 2>&1
python3 bench/gpu/make_model.py /tmp/model > $W/make_model.txt 2>&1; cat $W/make_model.txt
python3 bench/gpu/pilot.py $W /tmp/model 2>&1 | tee $W/pilot-stdout.txt
cp /tmp/model/config.json $W/model-config.json
tar -C $W -czf $OUT/pilot.tgz .
ls -la $W
