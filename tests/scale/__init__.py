"""Tests of fewer GPU hours per answer: parallel workers on PostgreSQL, crash learning, warm starts."""
