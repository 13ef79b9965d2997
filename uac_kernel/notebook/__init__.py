"""TODO wing purpose."""
