"""seqboat weights: canonical format I/O, converters, PyTorch references, training."""
