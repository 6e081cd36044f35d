"""PyTorch reference definitions of the canonical layer kinds (full-sequence form)."""
