"""A space ``tuner init`` writes from an SGLang command, checked against SGLang 0.5.9's own
parser (the real wheel's ``ServerArgs.add_cli_args``): the baseline and every flag and value the
space can render parse, as ``test_server_args.py`` checks the shipped spaces."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_sglang.conftest import REPO
from tests.real_sglang.server_args import server_args_parser
from tests.support.space_configs import configurations, server_flags
from tuner.space import load_space

COMMANDS = {
    # the seeds' launch on the emulated GLM-5 host (MoE, MTP head, 8 GPUs, the autotune gate)
    "glm5": "python3 -m sglang.launch_server --model-path /models/GLM-5-NVFP4 --quantization modelopt_fp4 "
            "--trust-remote-code --tp-size 8 --moe-runner-backend flashinfer_trtllm --max-running-requests 64 "
            "--mem-fraction-static 0.92 --attention-backend flashinfer --cuda-graph-bs 1 2 4 8",
    # graphs off and a model init could not read (a dense one of unknown size assumed)
    "unknown": "python3 -m sglang.launch_server --model-path /models/Other --disable-cuda-graph "
               "--chunked-prefill-size -1 --schedule-conservativeness 0.8",
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_rendered_flag_parses_with_the_real_parser(name: str, tmp_path: Path, real_sglang: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tuner", "init", "--emulate", "--out", f"{name}.yaml", "--",
                           *shlex.split(COMMANDS[name])], cwd=tmp_path, text=True, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    space = load_space(tmp_path / f"{name}.yaml")
    parser = server_args_parser(real_sglang)
    checked = 0
    for label, config in configurations(space):
        try:
            parser.parse_args(server_flags(space, config))
        except ValueError as error:
            pytest.fail(f"{name}: {label}: {error}")
        checked += 1
    assert checked > len(space.parameters)
    baseline = parser.parse_args(server_flags(space, space.baseline))
    assert baseline.model_path.endswith(("GLM-5-NVFP4", "Other"))
