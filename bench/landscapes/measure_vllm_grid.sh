#!/usr/bin/env bash
# Measure a grid of vLLM-on-CPU launch configurations once, through the tuner itself, and write
# the table that bench/search_efficiency.py replays (bench/landscapes/vllm_cpu_tiny.json).
#
#   /opt/tuner-venvs/vllm/bin/python tests/support/tiny_model.py /tmp/tiny-llama
#   bash bench/landscapes/measure_vllm_grid.sh       # 24 configurations, 18 of them started
#
# Grid (24 configurations): max_num_seqs 2, 16, 30 x max_num_batched_tokens 256, 2048 (vLLM's
# default here) x block_size 32, 128 (its default) x chunked_prefill true (its default), false. vLLM refuses to start with
# chunked prefill off and fewer batched tokens than max_model_len: the space's constraint skips
# those 6 without host time (they stay in the table as skipped rows); 18 are started. Prefix
# caching stays at vLLM's default (random prompts share no prefix). The space is
# search_spaces/vllm-cpu-tiny.yaml with a longer start-up limit (ready_s 600 instead of 240: under
# load other work once made the baseline need more than 240 s to answer /health) and
# prune_margin 0.95 (the baseline rule stops nothing, so every row has both levels: the replay
# applies the product's own rule to them), and the server started under `nice -n 5` while the
# tuner's client runs at the caller's priority: on 2 cores a server at the client's priority
# delays the client's event loop past its health limit. The space's own command also nices the
# server's autogroup (/proc/self/autogroup): with the kernel's autogroups, CPU time is shared
# between sessions first and `nice` alone did not lower the server against the client (the table
# of 2026-12-02 02:25, measured before that, had 10 of its 18 rows measurement-bound at level 8).
# A level the client measured itself on is stored `measurement_bound@<c>` in the table and the
# replay does not use it (nor any level after it).
# Every configuration is queued by hand and run by `tuner optimize` (random sampler: nothing is
# sampled while queued ones remain), so each one gets the product's own trial: start, /health,
# probe, levels 8 and 32 (128 requests each), stop.
set -euo pipefail
cd "$(dirname "$0")/../.."
SPACE=${GRID_SPACE:-/tmp/vllm-grid/vllm-cpu-tiny.yaml}
DB=${GRID_DB:-/tmp/vllm-grid/grid.db}
PORT=${GRID_PORT:-8311}
OUT=${GRID_OUT:-bench/landscapes/vllm_cpu_tiny.json}
rm -f "$DB"  # a fresh table each run
mkdir -p "$(dirname "$DB")" "$(dirname "$SPACE")"
# The measuring space: vllm-cpu-tiny.yaml with the changes above and the baseline spelled out as
# one cell of the grid (vLLM's defaults written explicitly), so that every row is a grid cell.
python3 - "$SPACE" <<'PY'
import sys, yaml
space = yaml.safe_load(open("search_spaces/vllm-cpu-tiny.yaml"))
space["timeouts"]["ready_s"] = 600
space["objective"]["prune_margin"] = 0.95
space["server"]["command"] = "nice -n 5 " + space["server"]["command"]
space["baseline"].update(max_num_seqs=2, max_num_batched_tokens=2048, block_size=128,
                         chunked_prefill=True, prefix_caching=None)
yaml.safe_dump(space, open(sys.argv[1], "w"), sort_keys=False)
PY
URL="sqlite:///$DB"
started=0
for seqs in 2 16 30; do
  for tokens in 256 2048; do
    for block in 32 128; do
      for chunked in true false; do
        tuner enqueue "$SPACE" --storage "$URL" --study-name grid \
          --set "max_num_seqs=$seqs" --set "max_num_batched_tokens=$tokens" \
          --set "block_size=$block" --set "chunked_prefill=$chunked"
        if [ "$chunked" = true ] || [ "$tokens" = 2048 ]; then started=$((started + 1)); fi
      done
    done
  done
done
uptime
tuner optimize "$SPACE" --storage "$URL" --study-name grid --trials "$started" \
  --sampler random --seed 0 --no-feasibility --port "$PORT"
# A cell whose trial failed measurement-bound (the client measured itself: on 2 cores beside
# vLLM's three processes its event loop sometimes lags past 100 ms) has no figure of the
# server's: it is queued and run once more.
mapfile -t AGAIN < <(python3 - "$DB" <<'PY'
import sys, optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
trials = optuna.load_study(study_name="grid", storage=f"sqlite:///{sys.argv[1]}").trials
bound = lambda t: t.state.name == "FAIL" and t.user_attrs.get("failure_reason") == "measurement-bound"
ran = {t.user_attrs.get("config_key") for t in trials if t.state.name in ("COMPLETE", "FAIL") and not bound(t)}
for t in trials:
    if bound(t) and t.user_attrs.get("config_key") not in ran:
        c = t.user_attrs["config"]
        print(" ".join(f"--set {k}={'null' if c[k] is None else str(c[k]).lower()}"
                       for k in ("max_num_seqs", "max_num_batched_tokens", "block_size", "chunked_prefill")))
PY
)
for cell in "${AGAIN[@]}"; do
  # shellcheck disable=SC2086  # one --set NAME=VALUE per word
  tuner enqueue "$SPACE" --storage "$URL" --study-name grid $cell
done
if [ "${#AGAIN[@]}" -gt 0 ]; then
  tuner optimize "$SPACE" --storage "$URL" --study-name grid --trials "${#AGAIN[@]}" \
    --sampler random --seed 1 --no-feasibility --port "$PORT"
fi
uptime
tuner trials "$SPACE" --storage "$URL" --study-name grid --json --out "$OUT"
echo "wrote $OUT"
