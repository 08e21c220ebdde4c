"""Tests of the load generator (``tuner.loadgen``) and ``tuner bench``."""
