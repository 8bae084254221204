"""The activity log: a company's events, read through `GET /client/events`."""
