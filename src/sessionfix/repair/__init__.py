"""Repairs: a plan by kind of edit, its bytes, their verification, the targets."""
