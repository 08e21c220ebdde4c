"""Stand-in of ``sglang.srt.layers`` (tuner emulator)."""
