"""Models: loading by hub id or path, where each architecture keeps its FFN blocks, and the offline zoo."""
