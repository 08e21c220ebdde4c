"""tuner: a Bayesian launch-configuration optimizer for LLM inference servers."""

__version__ = "0.1.0"
