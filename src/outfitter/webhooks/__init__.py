"""Outgoing webhooks: endpoints a company registers, deliveries, their signing and sending."""
