#!/usr/bin/env bash
# The whole loop on one real GPU (issue 30): run on the GPU machine, from the repository root, with
# .whl/ (bench/gpu/wheels.sh) carried, and optionally .gpu/study.db (an earlier call's study,
# which this call resumes):
#
#   bash bench/gpu/study.sh TRIALS SECONDS
#
# It installs the carried wheels, makes the random-weight model (bench/gpu/make_model.py), runs
# `tuner optimize search_spaces/transformers-h200.yaml` against `transformers serve` on the same
# machine (loopback only) until TRIALS trials or SECONDS seconds (then Ctrl-C, as a person would:
# the running trial is stopped cleanly and every finished one kept), then `tuner trials`,
# `tuner best`, `tuner report` and `tuner export`, and puts the study, the report, the launch
# script and the server logs in $OUT (at most 8 files: the device tool's limit).
set -uo pipefail
trials=${1:-14}
seconds=${2:-480}
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -m tuner "$@"\n' > /tmp/bin/tuner && chmod +x /tmp/bin/tuner
export PATH="/tmp/bin:$PATH"
export TUNER_MODEL_DIR=/tmp/model
[ -f /tmp/model/config.json ] || python3 bench/gpu/make_model.py /tmp/model || exit 1
space=search_spaces/transformers-h200.yaml
work=/tmp/gpu-study
mkdir -p "$work"
[ -f .gpu/study.db ] && cp .gpu/study.db "$work/study.db"
storage="sqlite:///$work/study.db"
{ date -u; nvidia-smi --query-gpu=index,name,memory.total,memory.used,power.draw,power.limit,compute_cap --format=csv; } > "$work/machine.txt" 2>&1
started=$SECONDS
timeout -s INT -k 60 "$seconds" tuner optimize "$space" --trials "$trials" --storage "$storage" --seed 1 2>&1 | tee "$work/optimize.txt"
echo "== optimize: exit ${PIPESTATUS[0]} after $((SECONDS - started)) s" | tee -a "$work/optimize.txt"
nvidia-smi --query-gpu=memory.used,power.draw --format=csv >> "$work/machine.txt" 2>&1
tuner trials "$space" --storage "$storage" --csv > "$work/trials.csv" 2>&1
tuner best "$space" --storage "$storage" > "$work/best.txt" 2>&1
tuner best "$space" --storage "$storage" --json > "$work/best.json" 2>&1
tuner report "$space" --storage "$storage" --out "$work/report.html" 2>&1 | tail -2
tuner export "$space" --storage "$storage" --out "$work/launch.sh" 2>&1 | tail -2
cp "$work/study.db" "$out/study.db"
cp "$work/report.html" "$out/report.html" 2>/dev/null
tar -C "$work" -czf "$out/results.tgz" --exclude study.db --exclude report.html .
[ -d studies/runs ] && tar -czf "$out/runs.tgz" studies/runs
cat "$work/trials.csv" | cut -c1-220
ls -la "$out"
