"""Disruption: emptiness, drift, expiration and consolidation under budgets, with replace-then-delete orchestration.

Methods are an ordered list behind one interface; every action has a dry-run path; nothing runs before state is synced.
"""
