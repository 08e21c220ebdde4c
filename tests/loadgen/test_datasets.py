"""The user's traffic: dataset files read as a stream, random lengths, shared prefixes, and
`tuner bench --dataset` sending what the file asks to a real server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.loadgen.conftest import pacing_server  # noqa: F401 (the fixture)
from tests.support.tuner_bench import tuner_bench
from tuner.errors import ConfigError
from tuner.loadgen import RandomLengths, SharedPrefix, load_file_pool
from tuner.loadgen._dataset_files import read_dataset
from tuner.study.trial import request_source


def _sharegpt(path: Path, n: int, indent: int | None = 2) -> Path:
    conversations = [
        {"id": str(i), "conversations": [{"from": "human", "value": f"question {i} " + "x" * (i % 50)},
                                         {"from": "gpt", "value": "answer " * (4 + i % 40)}]}
        for i in range(n)
    ]
    path.write_text(json.dumps(conversations, indent=indent))
    return path


def test_sharegpt_is_sampled_uniformly_and_holds_only_the_sample(tmp_path: Path) -> None:
    path = _sharegpt(tmp_path / "sharegpt.json", 3000)
    found = read_dataset(path, sample=100, seed=1)
    assert found.format == "sharegpt" and found.entries == 3000 and len(found.requests) == 100
    numbers = sorted(int(r.prompt.split()[1]) for r in found.requests)
    assert numbers[0] < 600 and numbers[-1] > 2400  # from the whole file, not its head
    assert all(r.output_estimated and r.output_len >= 1 for r in found.requests)
    # one line or pretty-printed: the same conversations
    flat = read_dataset(_sharegpt(tmp_path / "flat.json", 3000, indent=None), sample=100, seed=1)
    assert [r.prompt for r in flat.requests] == [r.prompt for r in found.requests]


def test_sharegpt_skips_conversations_without_a_prompt_and_a_reply(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "hi"}]},  # no reply
        {"conversations": [{"from": "gpt", "value": "a"}, {"from": "human", "value": "b"}]},
        {"conversations": [{"from": "human", "value": "ask"}, {"from": "gpt", "value": "reply here"}]},
    ]))
    found = read_dataset(path, sample=10)
    assert [r.prompt for r in found.requests] == ["ask"] and found.skipped == 2


def test_jsonl_of_prompts_and_of_chats(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"prompt": "Summarise this", "output_len": 40}\n\n'
        '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "output_len": 7}\n'
        '{"prompt": "no length given"}\n'
    )
    pool = load_file_pool(path, default_output_len=99)
    by_len = sorted((r.output_len, r.prompt) for r in pool.requests)
    assert [n for n, _ in by_len] == [7, 40, 99]
    assert by_len[0][1] == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"})
    chat = pool.pick(30, 0, "openai-chat")
    assert any(isinstance(p, list) and p[0]["role"] == "system" for p in chat.prompts)
    text = pool.pick(30, 0, "openai")
    assert all(isinstance(p, str) for p in text.prompts) and "system: be brief\nuser: hi" in text.prompts
    assert text.estimated


@pytest.mark.parametrize(
    "name, content, line, words",
    [
        ("broken.json", '[\n {"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},\n {"conversations": [{"from": \n', 4, "not valid JSON"),
        ("list.json", '[\n 1,\n 2\n]', 2, "JSON object"),
        ("missing.json", '[\n {"id": 1}\n]', 2, "conversations"),
        ("bad.jsonl", '{"prompt": "a", "output_len": 3}\n{"prompt": "b", "output_len": 0}\n', 2, "output_len"),
        ("notjson.jsonl", '{"prompt": "a"}\n{"prompt": \n', 2, "not a JSON object"),
        ("neither.jsonl", '{"prompt": "a"}\n{"text": "b"}\n', 2, "neither 'prompt'"),
        ("csv.txt", "prompt,output_len\nhi,3\n", 1, "neither a ShareGPT"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_line(tmp_path: Path, name: str, content: str,
                                                          line: int, words: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as error:
        read_dataset(path, sample=10)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}: ") and words in message and "fix:" in message
    assert "\n" not in message


def test_random_lengths_follow_the_range_ratio() -> None:
    picked = RandomLengths(input_len=200, output_len=100, range_ratio=0.5).pick(2000, 3, "sglang")
    assert min(picked.prompt_lens) >= 100 and max(picked.prompt_lens) == 200
    assert min(picked.output_lens) >= 50 and max(picked.output_lens) == 100
    assert [len(p) for p in picked.prompts] == picked.prompt_lens and not picked.estimated
    fixed = RandomLengths(64, 32, 1.0).pick(50, 3, "sglang")
    assert set(fixed.prompt_lens) == {64} and set(fixed.output_lens) == {32}


def test_shared_prefix_groups_share_exactly_their_prefix() -> None:
    source = SharedPrefix(groups=4, prefix_len=100, suffix_len=20, output_len=8)
    picked = source.pick(200, 1, "openai")
    prefixes = {tuple(p[:100]) for p in picked.prompts}
    assert prefixes == {tuple(p) for p in source.prefixes()}  # 4 groups, all used
    assert len({tuple(p[100:]) for p in picked.prompts}) == 200  # own suffixes
    again = SharedPrefix(4, 100, 20, 8).pick(10, 2, "openai")  # another level: same prefixes
    assert {tuple(p[:100]) for p in again.prompts} <= prefixes


def test_the_workload_section_builds_its_source_before_any_host_time(tmp_path: Path) -> None:
    from tuner.space import load_space

    glm5 = Path(__file__).resolve().parents[2] / "search_spaces" / "glm5.yaml"
    import yaml

    document = yaml.safe_load(glm5.read_text())
    (tmp_path / "chats.jsonl").write_text('{"prompt": "a", "output_len": 3}\n{"prompt": 5}\n')
    document["workload"]["dataset"] = "chats.jsonl"  # beside the search space
    space_file = tmp_path / "glm5.yaml"
    space_file.write_text(yaml.safe_dump(document, sort_keys=False))
    space = load_space(space_file)
    with pytest.raises(ConfigError, match=r"chats\.jsonl:2: prompt is not a non-empty string"):
        request_source(space.workload_for(False), space.path)
    done = subprocess.run([sys.executable, "-m", "tuner", "optimize", str(space_file), "--trials", "1",
                           "--host", "nobody@192.0.2.1:1"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "chats.jsonl:2:" in done.stderr
    document["workload"]["dataset"] = {"kind": "shared_prefix", "groups": 3, "prefix_len": 50}
    space_file.write_text(yaml.safe_dump(document, sort_keys=False))
    source = request_source(load_space(space_file).workload_for(False), space_file)
    assert source == SharedPrefix(3, 50, document["workload"]["input_len"], document["workload"]["output_len"])


def test_bench_sends_each_request_s_own_output_length(pacing_server, tmp_path: Path) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1)
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"word {i} " * (i + 1), "output_len": 3 + i}) + "\n"
                            for i in range(5)))
    done = tuner_bench(server.url, "--concurrency", "4", "--num-prompts", "40", "--warmup", "0",
                       "--api", "openai", "--dataset", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert "jsonl file" in done.stderr
    level = json.loads(done.stdout)["levels"][0]
    with urllib.request.urlopen(f"{server.url}/stats", timeout=10) as answer:
        asked = {r["max_tokens"] for r in json.load(answer)["records"]}
    assert asked <= {3, 4, 5, 6, 7} and len(asked) >= 3
    assert level["completed"] == 40 and level["input_tokens_estimated"] is False  # the server counted


def test_bench_takes_a_sharegpt_file_and_an_open_loop_rate(pacing_server, tmp_path: Path) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1)
    path = _sharegpt(tmp_path / "sharegpt.json", 50)
    done = tuner_bench(server.url, "--concurrency", "16", "--num-prompts", "60", "--warmup", "0",
                       "--dataset", str(path), "--request-rate", "40", "--arrival", "constant", "--json")
    assert done.returncode == 0, done.stderr
    level = json.loads(done.stdout)["levels"][0]
    assert level["request_rate"] == 40
    assert level["achieved_request_rate"] == pytest.approx(40, rel=0.15)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversations": 3}]')
    done = tuner_bench(server.url, "--dataset", str(bad))
    assert done.returncode == 2 and f"{bad}:1:" in done.stderr
