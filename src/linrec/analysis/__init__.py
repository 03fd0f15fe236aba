"""One module per chapter's analysis, turning measurements into tables and claims (each docstring names its chapter)."""
