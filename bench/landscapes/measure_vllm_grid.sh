#!/usr/bin/env bash
# Measure a grid of vLLM-on-CPU launch configurations once, through the tuner itself, and write
# the table that bench/search_efficiency.py replays (bench/landscapes/vllm_cpu_tiny.json).
#
#   /opt/tuner-venvs/vllm/bin/python tests/support/tiny_model.py /tmp/tiny-llama
#   nice -n 10 bash bench/landscapes/measure_vllm_grid.sh      # about 55 min on 2 shared cores (3 min a trial at load 4-8)
#
# Grid (18 configurations): max_num_seqs 2, 17, 32 x max_num_batched_tokens 256,
# 1024, unset (2048) x block_size 32, unset (128); chunked and prefix caching at vLLM's defaults.
# Every configuration is queued by hand and run by `tuner optimize` (random sampler: nothing is
# sampled while queued ones remain), so each one gets the product's own trial: start, /health,
# probe, levels 8 and 32 (128 requests each), stop.
set -euo pipefail
cd "$(dirname "$0")/../.."
SPACE=search_spaces/vllm-cpu-tiny.yaml
DB=${GRID_DB:-/tmp/vllm-grid/grid.db}
PORT=${GRID_PORT:-8311}
OUT=${GRID_OUT:-bench/landscapes/vllm_cpu_tiny.json}
mkdir -p "$(dirname "$DB")"
URL="sqlite:///$DB"
count=0
for seqs in 2 17 32; do
  for tokens in 256 1024 null; do
    for block in 32 null; do
      tuner enqueue "$SPACE" --storage "$URL" --study-name grid \
        --set "max_num_seqs=$seqs" --set "max_num_batched_tokens=$tokens" --set "block_size=$block"
      count=$((count + 1))
    done
  done
done
tuner optimize "$SPACE" --storage "$URL" --study-name grid --trials "$count" \
  --sampler random --seed 0 --no-feasibility --port "$PORT"
tuner trials "$SPACE" --storage "$URL" --study-name grid --json --out "$OUT"
echo "wrote $OUT"
