#!/usr/bin/env bash
# Measure a grid of vLLM-on-CPU launch configurations once, through the tuner itself, and write
# the table that bench/search_efficiency.py replays (bench/landscapes/vllm_cpu_tiny.json).
#
#   /opt/tuner-venvs/vllm/bin/python tests/support/tiny_model.py /tmp/tiny-llama
#   nice -n 10 bash bench/landscapes/measure_vllm_grid.sh      # about 30 min on 2 shared cores (3 min a trial at load 8-13)
#
# Grid (9 configurations): max_num_seqs 2, 17, 32 x max_num_batched_tokens 256, 1024, unset
# (2048); block size, chunked prefill and prefix caching at vLLM's defaults. The space is
# search_spaces/vllm-cpu-tiny.yaml with a longer start-up limit (ready_s 600 instead of 240: under
# load average 13 from other work the baseline once needed more than 240 s to answer /health).
# Every configuration is queued by hand and run by `tuner optimize` (random sampler: nothing is
# sampled while queued ones remain), so each one gets the product's own trial: start, /health,
# probe, levels 8 and 32 (128 requests each), stop.
set -euo pipefail
cd "$(dirname "$0")/../.."
SPACE=${GRID_SPACE:-/tmp/vllm-grid/vllm-cpu-tiny.yaml}
DB=${GRID_DB:-/tmp/vllm-grid/grid.db}
PORT=${GRID_PORT:-8311}
OUT=${GRID_OUT:-bench/landscapes/vllm_cpu_tiny.json}
mkdir -p "$(dirname "$DB")" "$(dirname "$SPACE")"
sed 's/^  ready_s: 240 .*/  ready_s: 600/' search_spaces/vllm-cpu-tiny.yaml > "$SPACE"
grep -q '^  ready_s: 600' "$SPACE"
URL="sqlite:///$DB"
count=0
for seqs in 2 17 32; do
  for tokens in 256 1024 null; do
    tuner enqueue "$SPACE" --storage "$URL" --study-name grid \
      --set "max_num_seqs=$seqs" --set "max_num_batched_tokens=$tokens"
    count=$((count + 1))
  done
done
tuner optimize "$SPACE" --storage "$URL" --study-name grid --trials "$count" \
  --sampler random --seed 0 --no-feasibility --port "$PORT"
tuner trials "$SPACE" --storage "$URL" --study-name grid --json --out "$OUT"
echo "wrote $OUT"
