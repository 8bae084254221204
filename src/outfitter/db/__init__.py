"""Persistence. Importing the package registers the checks of company rows' INSERTs on every
engine (db.write_checks), so that no TenantSession runs without them."""

from outfitter.db import write_checks as write_checks
