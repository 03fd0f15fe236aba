"""Text to token batches: named corpora (offline and hub), the BPE tokenizer trained here, fixed-length windows."""
