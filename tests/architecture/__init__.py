"""Static checks of src/ that `make lint` runs (no circle of imports, no library's private API)."""
