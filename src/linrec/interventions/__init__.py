"""What is done with a fitted block: swaps and perplexity, cross-feeding, bilinear probes, trained baselines."""
