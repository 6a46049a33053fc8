"""Scripted-policy dataset generators for the LMRL-Gym tasks (one module per task)."""
