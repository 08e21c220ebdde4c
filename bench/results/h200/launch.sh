#!/usr/bin/env bash
# Launch script exported by tuner on 2026-12-04
# study: transformers-h200  trial: 11  engine version: 5.17.0
# measured: 1,956 output tok/s (best clean level)
#   c=64: 1,956 output tok/s, p99 TTFT 985 ms, median TPOT 29.5 ms
#   c=16: 952 output tok/s, p99 TTFT 92 ms, median TPOT 16.3 ms
#   c=1: 85 output tok/s, p99 TTFT 19 ms, median TPOT 11.7 ms
set -euo pipefail
PYTHON="${PYTHON:-python3}"

export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export PYTHONUNBUFFERED=1

# the exact command line of the trial
transformers serve "${TUNER_MODEL_DIR:?}" --host 127.0.0.1 --port 8000 --dtype bfloat16 --continuous-batching --cb-use-cuda-graph --cb-num-blocks 16384 --cb-max-batch-tokens 512 --cb-max-memory-percent 0.95 --compile &
SERVER_PID=$!
trap 'kill -TERM "$SERVER_PID" 2>/dev/null || true' INT TERM
"$PYTHON" - http://127.0.0.1:8000/health 180 <<'TUNER_WAIT'
import sys, time, urllib.request
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
while time.monotonic() < deadline:
    try:
        if opener.open(url, timeout=5).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(1)
sys.exit(f"not ready: {url}")
TUNER_WAIT
echo "server ready on port 8000 (PID $SERVER_PID)"
if [ "${TUNER_EXIT_WHEN_READY:-0}" = 1 ]; then kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; exit 0; fi
wait "$SERVER_PID"
