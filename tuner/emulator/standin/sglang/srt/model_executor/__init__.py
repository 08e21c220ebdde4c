"""Stand-in of ``sglang.srt.model_executor`` (tuner emulator)."""
