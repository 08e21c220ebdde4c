#!/usr/bin/env bash
# Here (a machine that reaches the package index): the wheels that the GPU machine lacks, into .whl/
# (ignored by git; the device call carries it). The GPU image has torch, transformers 5.17, numpy,
# pandas, aiohttp, pyyaml, typer, rich, scikit-learn; `transformers serve` needs FastAPI and friends,
# and the tuner needs optuna, fabric and plotly. Python 3.12, manylinux x86-64, no dependencies
# resolved (each is named). About 28 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
platforms=()
for p in manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 pydantic==2.14.4 pydantic-core==2.50.5 \
  annotated-types typing-inspection openai==3.60.0 httpx2 httpcore2 truststore jiter distro sniffio \
  opentelemetry-api==1.45.2 optuna sqlalchemy alembic colorlog mako greenlet fabric paramiko invoke \
  decorator deprecated bcrypt cryptography pynacl cffi pycparser plotly
ls .whl | wc -l
