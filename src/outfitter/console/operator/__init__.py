"""The operator console at /operator: Outfitter's own staff, apart from the companies' console."""
