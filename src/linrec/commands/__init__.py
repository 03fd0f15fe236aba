"""Subcommands of the `linrec` command line."""
