"""One module per source checkpoint format, each mapping it to canonical tensors."""
