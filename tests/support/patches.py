"""The autotune gate of SGLang's model runner, as the patch tests and the doctor's tests find it."""

from __future__ import annotations

from tuner.patches import PatchSpec

# The 0.5.9 gate of tests/fixtures/reference/sglang.md section 2 (an excerpt of the function).
GATE_0_5_9 = '''\
class ModelRunner:
    def _should_run_flashinfer_autotune(self) -> bool:
        """Check if flashinfer autotune should be run."""
        if self.server_args.disable_flashinfer_autotune:
            return False

        backend_str = self.server_args.moe_runner_backend

        if backend_str not in [
            "flashinfer_trtllm",
            "flashinfer_mxfp4",
            # TODO: flashinfer_cutlass will cause some flashinfer compilation errors. To be fixed.
            # "flashinfer_cutlass",
        ]:
            return False
        return True
'''


# 0.5.13 already enables it: the text to find is gone.
GATE_0_5_13 = """\
class ModelRunner:
    def _should_run_flashinfer_autotune(self) -> bool:
        backend_str = self.server_args.moe_runner_backend
        moe_needs_autotune = backend_str in ["flashinfer_trtllm", "flashinfer_trtllm_routed",
            "flashinfer_mxfp4", "flashinfer_cutedsl", "flashinfer_cutlass"]
        return moe_needs_autotune
"""


GATE = PatchSpec(
    name="autotune_gate",
    package="sglang",
    file="srt/model_executor/model_runner.py",
    find='            # "flashinfer_cutlass",\n',
    replace='            "flashinfer_cutlass",\n',
    description="run FlashInfer autotune for the cutlass MoE backend",
)

