"""Hostile fixture submissions of the grading tests (see make_hostile.py)."""
