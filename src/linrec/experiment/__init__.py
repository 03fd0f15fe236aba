"""Experiments: named profiles (what runs), their resolution into models, corpora and batches, cached measurements."""
