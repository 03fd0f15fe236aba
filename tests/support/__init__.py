"""What several test files share: helpers, planted data and fixtures (those registered in tests/conftest.py)."""
