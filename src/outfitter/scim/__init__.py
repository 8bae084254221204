"""SCIM 2.0 provisioning (RFC 7643 / 7644) at /scim/v2: the protocol layer over `people`.

Identity providers (Okta, Microsoft Entra ID, HR systems) push Users (employees) and Groups
(departments) with a token of the `scim` scope. The schemas, filters, PatchOp and error messages
are scim2-models'; the rules of employees and departments stay in `outfitter.people`.
"""
