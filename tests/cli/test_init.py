"""``tuner init -- COMMAND``: a search space from the user's launch command, read against a host.

On the emulated GLM-5 host (works anywhere): the written space passes ``optimize --dry-run`` and
``doctor`` unedited, runs a short emulated study, and its baseline trial is the command given.
``transformers serve`` against its recorded ``--help`` (tests/fixtures/transformers), served by a
``transformers`` program on PATH that prints it. Mistakes: exit 2 and one line."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tuner.space import load_space
from tuner.study.storage import load_existing_study, resolve_storage

REPO = Path(__file__).resolve().parents[2]
GLM5 = ("python3 -m sglang.launch_server --model-path /models/GLM-5-NVFP4 --quantization modelopt_fp4 "
        "--trust-remote-code --tp-size 8 --moe-runner-backend flashinfer_trtllm --max-running-requests 64 "
        "--mem-fraction-static 0.92 --attention-backend flashinfer")


def tuner(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, text=True, capture_output=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          stdin=subprocess.DEVNULL, check=False)


def pairs(argv: list[str]) -> Counter[tuple[str, str | None]]:
    """A command line's flags with their values (order aside): what the server is given."""
    found: Counter[tuple[str, str | None]] = Counter()
    for index, word in enumerate(argv):
        if word.startswith("--"):
            following = argv[index + 1] if index + 1 < len(argv) else None
            found[(word, None if following is None or following.startswith("--") else following)] += 1
    return found


def without_address(argv: list[str]) -> list[str]:
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--host", "--port"):
            skip = True
        else:
            out.append(word)
    return out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def emulated_space(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("init-emulated")
    # a port of its own: other tests on this machine may hold SGLang's default
    command = [*shlex.split(GLM5), "--port", str(free_port())]
    done = tuner("init", "--emulate", "--out", "glm5-mine.yaml", "--", *command, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "glm5-mine.yaml", done


def test_the_written_space_holds_the_command_as_its_baseline(emulated_space) -> None:
    path, done = emulated_space
    space = load_space(path)
    baseline = space.render(space.baseline, resolve=False).argv
    assert baseline[:3] == ["python3", "-m", "sglang.launch_server"]
    assert pairs(without_address(baseline)) == pairs(shlex.split(GLM5))
    text = path.read_text()
    assert "8 x NVIDIA RTX PRO 6000 Blackwell" in text and "256 experts" in text
    # every parameter line is followed by its one-line reason
    lines = text.splitlines()
    start = lines.index("parameters:                       # what the study searches, in order; a when: condition reads only earlier ones")
    for name in space.parameters:
        at = next(i for i in range(start, len(lines)) if lines[i].startswith(f"  {name}: {{"))
        assert lines[at + 1].startswith("    # ") and len(lines[at + 1]) > 30, name
    assert "wrote glm5-mine.yaml" in done.stderr


def test_the_levers_fit_the_emulated_model_and_machine(emulated_space) -> None:
    space = load_space(emulated_space[0])
    names = set(space.parameters)
    # MoE + MTP head + latent attention (config.json), 8 GPUs, the gate's text in the installed file
    assert {"moe_runner_backend", "autotune_gate", "ep_size", "dp_attention", "speculative_algorithm"} <= names
    assert "tp_size" not in names  # only 8 holds 405 GB at 95.6 GB a GPU: kept fixed as given
    assert "fa3" not in space.parameters["attention_backend"].choices  # Hopper-only, compute capability 12 here
    assert space.patches["autotune_gate"].file == "srt/model_executor/model_runner.py"


def test_dry_run_and_doctor_pass_unedited(emulated_space) -> None:
    path = emulated_space[0]
    dry = tuner("optimize", path.name, "--emulate", "--dry-run", "--trials", "4", cwd=path.parent)
    assert dry.returncode == 0, dry.stderr
    assert "baseline: python3 -m sglang.launch_server" in dry.stdout
    doctor = tuner("doctor", path.name, "--emulate", cwd=path.parent)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "FAIL" not in doctor.stdout


def test_a_short_emulated_study_runs_and_its_baseline_is_the_command(emulated_space) -> None:
    path = emulated_space[0]
    done = tuner("optimize", path.name, "--emulate", "--trials", "2", "--seed", "1", cwd=path.parent, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    space = load_space(path)
    url, _ = resolve_storage(str(path.parent / "studies" / f"{path.stem}-emulated.db"))  # optimize's default there
    study = load_existing_study(url, space.name)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 2
    assert space.config_from_params(study.trials[0].params) == space.baseline
    assert study.trials[0].value > 0


def test_a_flag_the_engine_does_not_know_is_refused_with_the_closest(tmp_path: Path) -> None:
    command = GLM5.replace("--max-running-requests", "--max-runing-requests")
    done = tuner("init", "--emulate", "--", *shlex.split(command), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        ("tuner: error: tuner init: the command: --max-runing-requests is not a flag of the installed "
        "sglang 0.5.9 on the emulated GLM-5 host; fix: did you mean --max-running-requests?")]
    assert not list(tmp_path.glob("*.yaml"))


def test_what_could_not_be_read_is_said_in_the_file_and_on_the_terminal(tmp_path: Path) -> None:
    command = "python3 -m sglang.launch_server --model-path /models/Other-7B --max-running-requests 32"
    done = tuner("init", "--emulate", "--out", "other.yaml", "--", *shlex.split(command), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = "no config.json for /models/Other-7B on local; assumed: a dense model of unknown size"
    assert said in done.stderr
    text = (tmp_path / "other.yaml").read_text()
    assert f"#   - {said}" in text
    space = load_space(tmp_path / "other.yaml")
    assert "moe_runner_backend" not in space.parameters and space.model.fit is None
    assert space.model.workload.levels == [32, 128]


def test_your_traffic_and_lengths_make_the_workload(tmp_path: Path) -> None:
    (tmp_path / "traffic.jsonl").write_text('{"prompt": "hello there", "output_len": 16}\n')
    done = tuner("init", "--emulate", "--out", "d.yaml", "--dataset", "traffic.jsonl", "--input-len", "128",
                 "--output-len", "64", "--levels", "8,32", "--", *shlex.split(GLM5), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    workload = load_space(tmp_path / "d.yaml").model.workload
    assert (workload.levels, workload.input_len, workload.output_len) == ([8, 32], 128, 64)
    assert str(workload.dataset.path if hasattr(workload.dataset, "path") else workload.dataset).endswith("traffic.jsonl")


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["init", "--", "python3", "-m", "http.server"], ["init"],
                 ["init", "--emulate", "--", "vllm", "serve", "/m"],
                 ["init", "--emulate", "--levels", "64,16", "--", *shlex.split(GLM5)],
                 ["init", "--emulate", "--dataset", "missing.jsonl", "--", *shlex.split(GLM5)]):
        done = tuner(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tuner: error: ") and "; fix: " in lines[0], lines


@pytest.fixture
def recorded_transformers(tmp_path: Path) -> dict[str, str]:
    """A ``transformers`` program that prints transformers 5.17's recorded ``serve --help``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    help_file = REPO / "tests" / "fixtures" / "transformers" / "serve-help.txt"
    program = bin_dir / "transformers"
    program.write_text(f"#!{sys.executable}\nimport sys\n"
                       f"if sys.argv[1:3] == ['serve', '--help']:\n"
                       f"    print(open({str(help_file)!r}).read())\n"
                       "else:\n    sys.exit('only serve --help is recorded')\n")
    program.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_transformers_serve_against_its_recorded_help(tmp_path: Path, recorded_transformers) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 64, '
                                       '"num_hidden_layers": 4, "num_attention_heads": 8}')
    command = f"transformers serve {model} --continuous-batching --dtype bfloat16 --cb-block-size 64"
    done = tuner("init", "--out", "tf.yaml", "--", *shlex.split(command), cwd=tmp_path, env=recorded_transformers)
    assert done.returncode == 0, done.stderr
    space = load_space(tmp_path / "tf.yaml")
    assert space.engine == "transformers"
    known = (REPO / "tests" / "fixtures" / "transformers" / "serve-help.txt").read_text()
    for flag in space.flags():
        assert f"{flag} " in known or f"{flag}\n" in known, flag
    baseline = space.render(space.baseline, resolve=False).argv
    program = shlex.split(space.command)
    assert program[0] == "sh" and program[-2:] == ["transformers", "serve"]  # niced: no GPU, the client shares the CPU
    assert baseline[:len(program) + 1] == [*program, str(model)]
    assert pairs(without_address(baseline)) == pairs(shlex.split(command))
    assert space.baseline["block_size"] == 64 and space.baseline["continuous_batching"] is True
    assert "Qwen3MoeForCausalLM: MoE, 64 experts" in (tmp_path / "tf.yaml").read_text()
    dry = tuner("optimize", "tf.yaml", "--dry-run", "--trials", "3", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr

    wrong = command.replace("--cb-block-size", "--cb-blok-size")
    done = tuner("init", "--out", "tf2.yaml", "--", *shlex.split(wrong), cwd=tmp_path, env=recorded_transformers)
    assert done.returncode == 2
    assert "--cb-blok-size is not a flag of the installed transformers" in done.stderr
    assert "fix: did you mean --cb-block-size?" in done.stderr


def test_secrets_in_the_command_are_never_written(tmp_path: Path) -> None:
    command = ("HF_TOKEN=hf_private python3 -m sglang.launch_server --model-path /models/GLM-5-NVFP4 "
               "--api-key sk-private --tp-size 8")
    done = tuner("init", "--emulate", "--out", "s.yaml", "--", *shlex.split(command), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.yaml").read_text()
    assert "private" not in text + done.stdout + done.stderr
    space = load_space(tmp_path / "s.yaml")
    assert space.model.server.flags["--api-key"] == "${SGLANG_API_KEY}"
    assert space.model.server.env["HF_TOKEN"] == "${HF_TOKEN}"


def test_a_switch_and_its_no_form_stay_with_the_search(tmp_path: Path, recorded_transformers) -> None:
    command = "transformers serve /m --no-continuous-batching --no-compile"
    done = tuner("init", "--out", "t.yaml", "--", *shlex.split(command), cwd=tmp_path, env=recorded_transformers)
    assert done.returncode == 0, done.stderr
    space = load_space(tmp_path / "t.yaml")
    assert "--no-compile" not in space.model.server.flags and "--no-continuous-batching" not in space.model.server.flags
    assert space.baseline["continuous_batching"] is False and space.baseline["compile"] is False


def test_sglang_serve_is_read_as_launch_server(tmp_path: Path) -> None:
    command = "sglang serve --model-path /models/GLM-5-NVFP4 --tp-size 8 --max-running-requests 128"
    done = tuner("init", "--emulate", "--out", "serve.yaml", "--", *shlex.split(command), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    space = load_space(tmp_path / "serve.yaml")
    assert space.command == "sglang serve" and space.baseline["max_running_requests"] == 128
    dry = tuner("optimize", "serve.yaml", "--emulate", "--dry-run", "--trials", "2", cwd=tmp_path)
    assert dry.returncode == 0 and "baseline: sglang serve --model-path /models/GLM-5-NVFP4" in dry.stdout, dry.stderr


@pytest.fixture
def recorded_vllm(tmp_path: Path) -> dict[str, str]:
    """A ``vllm`` program that prints vLLM 0.32.0's recorded ``--help=all``, and an
    ``nvidia-smi`` that answers init's query with 8 x H100 (tests/fixtures/vllm, nvidia-smi)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    help_file = REPO / "tests" / "fixtures" / "vllm" / "help-all.txt"
    smi_file = REPO / "tests" / "fixtures" / "nvidia-smi" / "h100x8_query.csv"
    (bin_dir / "vllm").write_text(f"#!{sys.executable}\nimport sys\n"
                                  f"if sys.argv[1:2] == ['serve'] and sys.argv[2].startswith('--help'):\n"
                                  f"    print(open({str(help_file)!r}).read())\n"
                                  "else:\n    sys.exit('only serve --help is recorded')\n")
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\ncat {shlex.quote(str(smi_file))}\n")
    for program in bin_dir.iterdir():
        program.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_vllm_moe_and_mtp_levers_from_the_recorded_help(tmp_path: Path, recorded_vllm) -> None:
    model = tmp_path / "glm-air"
    model.mkdir()
    (model / "config.json").write_text((REPO / "tests" / "fixtures" / "vllm" / "config-glm-moe-mtp.json").read_text())
    (model / "model.safetensors.index.json").write_text('{"metadata": {"total_size": %d}}' % int(205.8 * 2**30))
    command = f"vllm serve {model} --tensor-parallel-size 4 --max-num-seqs 128 --port {free_port()}"
    done = tuner("init", "--out", "v.yaml", "--", *shlex.split(command), cwd=tmp_path, env=recorded_vllm)
    assert done.returncode == 0, done.stderr
    space = load_space(tmp_path / "v.yaml")
    assert {"expert_parallel", "data_parallel_size", "speculative_method", "num_speculative_tokens"} <= set(space.parameters)
    assert space.parameters["data_parallel_size"].choices == [2]
    assert space.model.fit is not None and space.model.fit.gpus == 8
    baseline = space.render(space.baseline, resolve=False).argv
    assert baseline[:3] == ["vllm", "serve", str(model)]
    assert pairs(without_address(baseline)) == pairs(without_address(shlex.split(command)))
    dry = tuner("optimize", "v.yaml", "--dry-run", "--trials", "3", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert f"baseline: vllm serve {model}" in dry.stdout
