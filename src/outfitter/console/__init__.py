"""The web console (docs/console.md): server-rendered pages at /console over the same services and
tenancy as the API, for the people who run a company's equipment."""
