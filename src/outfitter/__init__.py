"""Outfitter: equipment and asset management service."""
