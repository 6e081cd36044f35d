"""The training scripts of the bundled models (weights/models) and what they share."""
