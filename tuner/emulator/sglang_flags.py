"""SGLang 0.5.9's ``launch_server`` flags as data: names, value types, defaults, choices.

Read once from the published sglang 0.5.9 wheel (``ServerArgs.add_cli_args`` run under a plain
``argparse.ArgumentParser``); only the interface is kept, not the help texts.
:mod:`tuner.emulator.cli_args` turns the table into the emulator's argument parser.
"""

from __future__ import annotations

__all__ = ["DEPRECATED_SWITCHES", "OPTIONS", "SGLANG_VERSION", "SWITCHES"]

SGLANG_VERSION = "0.5.9"

LOAD_FORMAT_CHOICES = (
    "auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf", "bitsandbytes",
    "layered", "flash_rl", "remote", "remote_instance", "fastsafetensors", "private",
)

ATTENTION_BACKEND_CHOICES = (
    "triton", "torch_native", "flex_attention", "nsa", "cutlass_mla", "fa3", "fa4", "flashinfer",
    "flashmla", "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
)

NSA_PREFILL_BACKEND_CHOICES = (
    "flashmla_sparse", "flashmla_kv", "flashmla_auto", "fa3", "tilelang", "aiter", "trtllm",
)

SPECULATIVE_MOE_RUNNER_BACKEND_CHOICES = (
    "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
    "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass",
)

SPECULATIVE_MOE_A2A_BACKEND_CHOICES = (
    "none", "deepep", "mooncake", "mori", "ascend_fuseep", "flashinfer",
)

DTYPE_CHOICES = (
    "auto", "half", "float16", "bfloat16", "float", "float32",
)

QUANTIZATION_CHOICES = (
    "awq", "fp8", "mxfp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
    "modelopt", "modelopt_fp8", "modelopt_fp4", "petit_nvfp4", "w8a8_int8", "w8a8_fp8",
    "moe_wna16", "qoq", "w4afp8", "mxfp4", "auto-round", "compressed-tensors", "modelslim",
    "quark_int4fp8_moe",
)

KV_CACHE_DTYPE_CHOICES = (
    "auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1",
)

SCHEDULE_POLICY_CHOICES = (
    "lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key",
)

LOAD_BALANCE_METHOD_CHOICES = (
    "auto", "round_robin", "follow_bootstrap_room", "total_requests", "total_tokens",
)

LORA_BACKEND_CHOICES = (
    "triton", "csgmv", "ascend", "torch_native",
)

GRAMMAR_BACKEND_CHOICES = (
    "xgrammar", "outlines", "llguidance", "none",
)

MM_ATTENTION_BACKEND_CHOICES = (
    "sdpa", "fa3", "fa4", "triton_attn", "ascend_attn", "aiter_attn",
)

FP8_GEMM_BACKEND_CHOICES = (
    "auto", "deep_gemm", "flashinfer_trtllm", "flashinfer_deepgemm", "cutlass", "triton", "aiter",
)

FP4_GEMM_BACKEND_CHOICES = (
    "auto", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm",
)

SPECULATIVE_ALGORITHM_CHOICES = (
    "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM",
)

SPECULATIVE_DRAFT_MODEL_QUANTIZATION_CHOICES = (
    "awq", "fp8", "mxfp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
    "modelopt", "modelopt_fp8", "modelopt_fp4", "petit_nvfp4", "w8a8_int8", "w8a8_fp8",
    "moe_wna16", "qoq", "w4afp8", "mxfp4", "auto-round", "compressed-tensors", "modelslim",
    "quark_int4fp8_moe", "unquant",
)

HICACHE_WRITE_POLICY_CHOICES = (
    "write_back", "write_through", "write_through_selective",
)

HICACHE_MEM_LAYOUT_CHOICES = (
    "layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head",
)

HICACHE_STORAGE_BACKEND_CHOICES = (
    "file", "mooncake", "hf3fs", "nixl", "aibrix", "dynamic", "eic",
)

HICACHE_STORAGE_PREFETCH_POLICY_CHOICES = (
    "best_effort", "wait_complete", "timeout",
)

DISAGGREGATION_TRANSFER_BACKEND_CHOICES = (
    "mooncake", "nixl", "ascend", "fake", "mori",
)

ENCODER_TRANSFER_BACKEND_CHOICES = (
    "zmq_to_scheduler", "zmq_to_tokenizer", "mooncake",
)

# store_true flags (bare, no value); aliases share one string, space-separated.
SWITCHES: tuple[str, ...] = (
    "--skip-tokenizer-init", "--trust-remote-code", "--is-embedding", "--enable-multimodal",
    "--grpc-mode", "--skip-server-warmup", "--checkpoint-engine-wait-weights-before-ready",
    "--enable-fp32-lm-head", "--quantize-and-serve", "--enable-dynamic-chunking",
    "--enable-priority-scheduling", "--abort-on-priority-when-disabled",
    "--schedule-low-priority-values-first", "--disable-hybrid-swa-memory",
    "--enable-prefill-delayer", "--stream-output", "--constrained-json-disable-any-whitespace",
    "--sleep-on-idle", "--log-requests", "--show-time-cost", "--enable-metrics",
    "--enable-metrics-for-all-schedulers", "--collect-tokens-histogram",
    "--enable-request-time-stats-logging", "--enable-trace", "--export-metrics-to-file",
    "--enable-cache-report", "--enable-lora", "--enable-lora-overlap-loading",
    "--disable-flashinfer-autotune", "--enable-multi-layer-eagle",
    "--enable-flashinfer-allreduce-fusion", "--enable-eplb",
    "--enable-expert-distribution-metrics", "--enable-hierarchical-cache",
    "--disable-hicache-numa-detect", "--enable-lmcache", "--enable-double-sparsity",
    "--disable-radix-cache", "--disable-cuda-graph", "--disable-cuda-graph-padding",
    "--enable-profile-cuda-graph", "--enable-cudagraph-gc", "--enable-layerwise-nvtx-marker",
    "--enable-nccl-nvls", "--enable-symm-mem", "--disable-flashinfer-cutlass-moe-fp4-allgather",
    "--enable-tokenizer-batch-encode", "--disable-tokenizer-batch-decode",
    "--disable-outlines-disk-cache", "--disable-custom-all-reduce", "--enable-mscclpp",
    "--enable-torch-symm-mem", "--disable-overlap-schedule", "--enable-mixed-chunk",
    "--enable-dp-attention", "--enable-dp-lm-head", "--enable-two-batch-overlap",
    "--enable-single-batch-overlap", "--enable-torch-compile", "--enable-torch-compile-debug-mode",
    "--enable-piecewise-cuda-graph", "--enable-nan-detection", "--enable-p2p-check",
    "--triton-attention-reduce-in-fp32", "--delete-ckpt-after-loading", "--enable-memory-saver",
    "--enable-weights-cpu-backup", "--enable-draft-weights-cpu-backup", "--allow-auto-truncate",
    "--enable-custom-logit-processor", "--flashinfer-mla-disable-ragged",
    "--disable-shared-experts-fusion", "--disable-chunked-prefix-cache",
    "--disable-fast-image-processor", "--keep-mm-feature-on-device",
    "--enable-return-hidden-states", "--enable-return-routed-experts",
    "--enable-deterministic-inference", "--enable-attn-tp-input-scattered",
    "--enable-nsa-prefill-context-parallel", "--enable-fused-qk-norm-rope",
    "--enable-precise-embedding-interpolation", "--enable-dynamic-batch-tokenizer",
    "--disaggregation-decode-enable-offload-kvcache", "--encoder-only", "--language-only",
    "--weight-loader-disable-mmap",
    "--remote-instance-weight-loader-start-seed-via-transfer-engine", "--enable-pdmux",
    "--enable-broadcast-mm-inputs-process", "--mm-enable-dp-encoder", "--enable-prefix-mm-cache",
)

# flags that take no value and only warn that they are deprecated.
DEPRECATED_SWITCHES: tuple[str, ...] = ("--hybrid-kvcache-ratio", "--prefill-round-robin-balance")

# (option strings, value type, default, choices, nargs[, dest]) of the flags that take a value.
# A value type of "json" is parsed with json.loads.
OPTIONS: tuple[tuple, ...] = (
    ("--model-path --model", "str", None, None, None),
    ("--tokenizer-path", "str", None, None, None),
    ("--tokenizer-mode", "str", "auto", ("auto", "slow"), None),
    ("--tokenizer-worker-num", "int", 1, None, None),
    ("--load-format", "str", "auto", LOAD_FORMAT_CHOICES, None),
    ("--model-loader-extra-config", "str", "{}", None, None),
    ("--context-length", "int", None, None, None),
    ("--revision", "str", None, None, None),
    ("--model-impl", "str", "auto", None, None),
    ("--host", "str", "127.0.0.1", None, None),
    ("--port", "int", 30000, None, None),
    ("--fastapi-root-path", "str", "", None, None),
    ("--warmups", "str", None, None, None),
    ("--nccl-port", "int", None, None, None),
    ("--dtype", "str", "auto", DTYPE_CHOICES, None),
    ("--quantization", "str", None, QUANTIZATION_CHOICES, None),
    ("--quantization-param-path", "str", None, None, None),
    ("--kv-cache-dtype", "str", "auto", KV_CACHE_DTYPE_CHOICES, None),
    ("--modelopt-quant", "str", None, None, None),
    ("--modelopt-checkpoint-restore-path", "str", None, None, None),
    ("--modelopt-checkpoint-save-path", "str", None, None, None),
    ("--modelopt-export-path", "str", None, None, None),
    ("--rl-quant-profile", "str", None, None, None),
    ("--mem-fraction-static", "float", None, None, None),
    ("--max-running-requests", "int", None, None, None),
    ("--max-queued-requests", "int", None, None, None),
    ("--max-total-tokens", "int", None, None, None),
    ("--chunked-prefill-size", "int", None, None, None),
    ("--prefill-max-requests", "int", None, None, None),
    ("--max-prefill-tokens", "int", 16384, None, None),
    ("--schedule-policy", "str", "fcfs", SCHEDULE_POLICY_CHOICES, None),
    ("--priority-scheduling-preemption-threshold", "int", 10, None, None),
    ("--schedule-conservativeness", "float", 1.0, None, None),
    ("--page-size", "int", None, None, None),
    ("--swa-full-tokens-ratio", "float", 0.8, None, None),
    ("--radix-eviction-policy", "str", "lru", ("lru", "lfu"), None),
    ("--prefill-delayer-max-delay-passes", "int", 30, None, None),
    ("--prefill-delayer-token-usage-low-watermark", "float", None, None, None),
    ("--prefill-delayer-forward-passes-buckets", "float", None, None, "+"),
    ("--prefill-delayer-wait-seconds-buckets", "float", None, None, "+"),
    ("--device", "str", None, None, None),
    ("--tensor-parallel-size --tp-size", "int", 1, None, None),
    ("--attention-context-parallel-size --attn-cp-size", "int", 1, None, None),
    ("--moe-data-parallel-size --moe-dp-size", "int", 1, None, None),
    ("--pipeline-parallel-size --pp-size", "int", 1, None, None),
    ("--pp-max-micro-batch-size", "int", None, None, None),
    ("--pp-async-batch-depth", "int", 0, None, None),
    ("--stream-interval", "int", 1, None, None),
    ("--random-seed", "int", None, None, None),
    ("--constrained-json-whitespace-pattern", "str", None, None, None),
    ("--watchdog-timeout", "float", 300, None, None),
    ("--soft-watchdog-timeout", "float", None, None, None),
    ("--dist-timeout", "int", None, None, None),
    ("--download-dir", "str", None, None, None),
    ("--model-checksum", "str", None, None, "?"),
    ("--base-gpu-id", "int", 0, None, None),
    ("--gpu-id-step", "int", 1, None, None),
    ("--custom-sigquit-handler", "str", None, None, None),
    ("--log-level", "str", "info", None, None),
    ("--log-level-http", "str", None, None, None),
    ("--log-requests-level", "int", 2, (0, 1, 2, 3), None),
    ("--log-requests-format", "str", "text", ("text", "json"), None),
    ("--log-requests-target", "str", None, None, "+"),
    ("--uvicorn-access-log-exclude-prefixes", "str", [], None, "*"),
    ("--crash-dump-folder", "str", None, None, None),
    ("--tokenizer-metrics-custom-labels-header", "str", "x-custom-labels", None, None),
    ("--tokenizer-metrics-allowed-custom-labels", "str", None, None, "+"),
    ("--extra-metric-labels", "json", None, None, None),
    ("--bucket-time-to-first-token", "float", None, None, "+"),
    ("--bucket-inter-token-latency", "float", None, None, "+"),
    ("--bucket-e2e-request-latency", "float", None, None, "+"),
    ("--prompt-tokens-buckets", "str", None, None, "+"),
    ("--generation-tokens-buckets", "str", None, None, "+"),
    ("--gc-warning-threshold-secs", "float", 0.0, None, None),
    ("--decode-log-interval", "int", 40, None, None),
    ("--kv-events-config", "str", None, None, None),
    ("--otlp-traces-endpoint", "str", "localhost:4317", None, None),
    ("--export-metrics-to-file-dir", "str", None, None, None),
    ("--api-key", "str", None, None, None),
    ("--admin-api-key", "str", None, None, None),
    ("--served-model-name", "str", None, None, None),
    ("--weight-version", "str", "default", None, None),
    ("--chat-template", "str", None, None, None),
    ("--hf-chat-template-name", "str", None, None, None),
    ("--completion-template", "str", None, None, None),
    ("--file-storage-path", "str", "sglang_storage", None, None),
    ("--reasoning-parser", "str", None, None, None),
    ("--tool-call-parser", "str", None, None, None),
    ("--tool-server", "str", None, None, None),
    ("--sampling-defaults", "str", "model", ("openai", "model"), None),
    ("--data-parallel-size --dp-size", "int", 1, None, None),
    ("--load-balance-method", "str", "auto", LOAD_BALANCE_METHOD_CHOICES, None),
    ("--dist-init-addr --nccl-init-addr", "str", None, None, None),
    ("--nnodes", "int", 1, None, None),
    ("--node-rank", "int", 0, None, None),
    ("--json-model-override-args", "str", "{}", None, None),
    ("--preferred-sampling-params", "json", None, None, None),
    ("--max-lora-rank", "int", None, None, None),
    ("--lora-target-modules", "str", None, None, "*"),
    ("--lora-paths", "str", None, None, "*"),
    ("--max-loras-per-batch", "int", 8, None, None),
    ("--max-loaded-loras", "int", None, None, None),
    ("--lora-eviction-policy", "str", "lru", ("lru", "fifo"), None),
    ("--lora-backend", "str", "csgmv", LORA_BACKEND_CHOICES, None),
    ("--max-lora-chunk-size", "int", 16, (16, 32, 64, 128), None),
    ("--attention-backend", "str", None, ATTENTION_BACKEND_CHOICES, None),
    ("--prefill-attention-backend", "str", None, ATTENTION_BACKEND_CHOICES, None),
    ("--decode-attention-backend", "str", None, ATTENTION_BACKEND_CHOICES, None),
    ("--sampling-backend", "str", None, ("pytorch", "ascend", "flashinfer"), None),
    ("--grammar-backend", "str", None, GRAMMAR_BACKEND_CHOICES, None),
    ("--mm-attention-backend", "str", None, MM_ATTENTION_BACKEND_CHOICES, None),
    ("--nsa-prefill-backend", "str", None, NSA_PREFILL_BACKEND_CHOICES, None),
    ("--nsa-decode-backend", "str", None, NSA_PREFILL_BACKEND_CHOICES, None),
    (
        "--fp8-gemm-backend", "str", "auto",
        FP8_GEMM_BACKEND_CHOICES, None, "fp8_gemm_runner_backend",
    ),
    (
        "--fp4-gemm-backend", "str", "flashinfer_cutlass",
        FP4_GEMM_BACKEND_CHOICES, None, "fp4_gemm_runner_backend",
    ),
    ("--speculative-algorithm", "str", None, SPECULATIVE_ALGORITHM_CHOICES, None),
    ("--speculative-draft-model-path --speculative-draft-model", "str", None, None, None),
    ("--speculative-draft-model-revision", "str", None, None, None),
    ("--speculative-draft-load-format", "str", None, LOAD_FORMAT_CHOICES, None),
    ("--speculative-num-steps", "int", None, None, None),
    ("--speculative-eagle-topk", "int", None, None, None),
    ("--speculative-num-draft-tokens", "int", None, None, None),
    ("--speculative-accept-threshold-single", "float", 1.0, None, None),
    ("--speculative-accept-threshold-acc", "float", 1.0, None, None),
    ("--speculative-token-map", "str", None, None, None),
    ("--speculative-attention-mode", "str", "prefill", ("prefill", "decode"), None),
    ("--speculative-draft-attention-backend", "str", None, None, None),
    (
        "--speculative-moe-runner-backend", "str", None,
        SPECULATIVE_MOE_RUNNER_BACKEND_CHOICES, None,
    ),
    ("--speculative-moe-a2a-backend", "str", None, SPECULATIVE_MOE_A2A_BACKEND_CHOICES, None),
    (
        "--speculative-draft-model-quantization", "str", None,
        SPECULATIVE_DRAFT_MODEL_QUANTIZATION_CHOICES, None,
    ),
    ("--speculative-ngram-min-match-window-size", "int", 1, None, None),
    ("--speculative-ngram-max-match-window-size", "int", 12, None, None),
    ("--speculative-ngram-min-bfs-breadth", "int", 1, None, None),
    ("--speculative-ngram-max-bfs-breadth", "int", 10, None, None),
    ("--speculative-ngram-match-type", "str", "BFS", ("BFS", "PROB"), None),
    ("--speculative-ngram-branch-length", "int", 18, None, None),
    ("--speculative-ngram-capacity", "int", 10000000, None, None),
    ("--expert-parallel-size --ep-size --ep", "int", 1, None, None),
    ("--moe-a2a-backend", "str", "none", SPECULATIVE_MOE_A2A_BACKEND_CHOICES, None),
    ("--moe-runner-backend", "str", "auto", SPECULATIVE_MOE_RUNNER_BACKEND_CHOICES, None),
    ("--flashinfer-mxfp4-moe-precision", "str", "default", ("default", "bf16"), None),
    ("--deepep-mode", "str", "auto", ("normal", "low_latency", "auto"), None),
    ("--ep-num-redundant-experts", "int", 0, None, None),
    ("--ep-dispatch-algorithm", "str", None, None, None),
    ("--init-expert-location", "str", "trivial", None, None),
    ("--eplb-algorithm", "str", "auto", None, None),
    ("--eplb-rebalance-num-iterations", "int", 1000, None, None),
    ("--eplb-rebalance-layers-per-chunk", "int", None, None, None),
    ("--eplb-min-rebalancing-utilization-threshold", "float", 1.0, None, None),
    ("--expert-distribution-recorder-mode", "str", None, None, None),
    ("--expert-distribution-recorder-buffer-size", "int", None, None, None),
    ("--deepep-config", "str", None, None, None),
    ("--moe-dense-tp-size", "int", None, None, None),
    ("--elastic-ep-backend", "str", None, ("none", "mooncake"), None),
    ("--mooncake-ib-device", "str", None, None, None),
    ("--max-mamba-cache-size", "int", None, None, None),
    ("--mamba-ssm-dtype", "str", None, ("float32", "bfloat16", "float16"), None),
    ("--mamba-full-memory-ratio", "float", 0.9, None, None),
    ("--mamba-scheduler-strategy", "str", "auto", ("auto", "no_buffer", "extra_buffer"), None),
    ("--mamba-track-interval", "int", 256, None, None),
    ("--mamba-backend", "str", "triton", ("triton", "flashinfer"), None),
    ("--hicache-ratio", "float", 2.0, None, None),
    ("--hicache-size", "int", 0, None, None),
    ("--hicache-write-policy", "str", "write_through", HICACHE_WRITE_POLICY_CHOICES, None),
    ("--hicache-io-backend", "str", "kernel", ("direct", "kernel", "kernel_ascend"), None),
    ("--hicache-mem-layout", "str", "layer_first", HICACHE_MEM_LAYOUT_CHOICES, None),
    ("--hicache-storage-backend", "str", None, HICACHE_STORAGE_BACKEND_CHOICES, None),
    (
        "--hicache-storage-prefetch-policy", "str", "best_effort",
        HICACHE_STORAGE_PREFETCH_POLICY_CHOICES, None,
    ),
    ("--hicache-storage-backend-extra-config", "str", None, None, None),
    ("--hierarchical-sparse-attention-extra-config", "str", None, None, None),
    ("--kt-weight-path", "str", None, None, None),
    ("--kt-method", "str", "AMXINT4", None, None),
    ("--kt-cpuinfer", "int", None, None, None),
    ("--kt-threadpool-count", "int", 2, None, None),
    ("--kt-num-gpu-experts", "int", None, None, None),
    ("--kt-max-deferred-experts-per-token", "int", None, None, None),
    ("--dllm-algorithm", "str", None, None, None),
    ("--dllm-algorithm-config", "str", None, None, None),
    ("--ds-channel-config-path", "str", None, None, None),
    ("--ds-heavy-channel-num", "int", 32, None, None),
    ("--ds-heavy-token-num", "int", 256, None, None),
    ("--ds-heavy-channel-type", "str", "qk", None, None),
    ("--ds-sparse-decode-threshold", "int", 4096, None, None),
    ("--cpu-offload-gb", "int", 0, None, None),
    ("--offload-group-size", "int", -1, None, None),
    ("--offload-num-in-group", "int", 1, None, None),
    ("--offload-prefetch-step", "int", 1, None, None),
    ("--offload-mode", "str", "cpu", None, None),
    ("--multi-item-scoring-delimiter", "int", None, None, None),
    ("--cuda-graph-max-bs", "int", None, None, None),
    ("--cuda-graph-bs", "int", None, None, "+"),
    ("--tbo-token-distribution-threshold", "float", 0.48, None, None),
    ("--piecewise-cuda-graph-tokens", "int", None, None, "+"),
    ("--piecewise-cuda-graph-compiler", "str", "eager", ("eager", "inductor"), None),
    ("--torch-compile-max-bs", "int", 32, None, None),
    ("--piecewise-cuda-graph-max-tokens", "int", None, None, None),
    ("--torchao-config", "str", "", None, None),
    ("--triton-attention-num-kv-splits", "int", 8, None, None),
    ("--triton-attention-split-tile-size", "int", None, None, None),
    ("--num-continuous-decode-steps", "int", 1, None, None),
    ("--scheduler-recv-interval", "int", 1, None, None),
    ("--numa-node", "int", None, None, "+"),
    ("--rl-on-policy-target", "str", None, ("fsdp",), None),
    (
        "--nsa-prefill-cp-mode", "str", "round-robin-split",
        ("in-seq-split", "round-robin-split"), None,
    ),
    ("--dynamic-batch-tokenizer-batch-size", "int", 32, None, None),
    ("--dynamic-batch-tokenizer-batch-timeout", "float", 0.002, None, None),
    ("--debug-tensor-dump-output-folder", "str", None, None, None),
    ("--debug-tensor-dump-layers", "int", None, None, "+"),
    ("--debug-tensor-dump-input-file", "str", None, None, None),
    ("--debug-tensor-dump-inject", "str", False, None, None),
    ("--disaggregation-mode", "str", "null", ("null", "prefill", "decode"), None),
    (
        "--disaggregation-transfer-backend", "str", "mooncake",
        DISAGGREGATION_TRANSFER_BACKEND_CHOICES, None,
    ),
    ("--disaggregation-bootstrap-port", "int", 8998, None, None),
    ("--disaggregation-decode-tp", "int", None, None, None),
    ("--disaggregation-decode-dp", "int", None, None, None),
    ("--disaggregation-prefill-pp", "int", 1, None, None),
    ("--disaggregation-ib-device", "str", None, None, None),
    ("--num-reserved-decode-tokens", "int", 512, None, None),
    ("--disaggregation-decode-polling-interval", "int", 1, None, None),
    (
        "--encoder-transfer-backend", "str", "zmq_to_scheduler",
        ENCODER_TRANSFER_BACKEND_CHOICES, None,
    ),
    ("--encoder-urls", "str", [], None, "+"),
    ("--custom-weight-loader", "str", None, None, "*"),
    ("--remote-instance-weight-loader-seed-instance-ip", "str", None, None, None),
    ("--remote-instance-weight-loader-seed-instance-service-port", "int", None, None, None),
    ("--remote-instance-weight-loader-send-weights-group-ports", "json", None, None, None),
    ("--remote-instance-weight-loader-backend", "str", "nccl", ("transfer_engine", "nccl"), None),
    ("--pdmux-config-path", "str", None, None, None),
    ("--sm-group-num", "int", 8, None, None),
    ("--config", "str", None, None, None),
    ("--mm-max-concurrent-calls", "int", 32, None, None),
    ("--mm-per-request-timeout", "int", 10.0, None, None),
    ("--mm-process-config", "json", None, None, None),
    ("--limit-mm-data-per-request", "json", None, None, None),
    ("--decrypted-config-file", "str", None, None, None),
    ("--decrypted-draft-config-file", "str", None, None, None),
    ("--forward-hooks", "json", None, None, None),
)
