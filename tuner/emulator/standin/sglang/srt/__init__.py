"""Stand-in of ``sglang.srt`` (tuner emulator)."""
