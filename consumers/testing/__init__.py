"""Test helpers that start real infrastructure (no pytest dependency)."""
