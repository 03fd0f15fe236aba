"""Reporting: the paper's reported values, claims with a fixed verdict vocabulary, the ledger, a chapter's run."""
