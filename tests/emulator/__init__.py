"""Tests of the emulated GLM-5 host (tuner.emulator)."""
