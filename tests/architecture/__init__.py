"""The import-linter contract types of our own that pyproject.toml's `[tool.importlinter]` names."""
