"""Disruption: emptiness, drift (static pools' one for one) and consolidation under budgets, with replace-then-delete
orchestration. Expiration is not here: it bypasses budgets (`karpy.nodeclaim.expiration`).

Methods are an ordered list behind one interface; every action has a dry-run path; nothing runs before state is synced.
"""
