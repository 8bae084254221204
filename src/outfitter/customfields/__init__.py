"""A company's own fields on its devices and employees (docs/custom-fields.md)."""
