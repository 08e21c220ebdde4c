"""Tests of the search space (tuner.space)."""
