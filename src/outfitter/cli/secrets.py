"""`outfitter secrets`: the secrets Outfitter keeps at rest, sealed with OUTFITTER_SECRET_KEYS."""

from __future__ import annotations

import typer

from outfitter.cli.common import JsonFlag, app, emit, unit_of_work

secrets_app = typer.Typer(help="The secrets kept at rest (sealed).", no_args_is_help=True)
app.add_typer(secrets_app, name="secrets")


@secrets_app.command("reseal")
def reseal(as_json: JsonFlag = False) -> None:
    """Seal every secret kept at rest with the first of OUTFITTER_SECRET_KEYS: run it after
    putting a new key first, then the old key may be taken off the list."""
    from outfitter.console.security import reseal_totp_keys

    with unit_of_work() as session:
        count = reseal_totp_keys(session)
    emit(as_json, {"resealed": count}, f"{count} secret(s) sealed again with the first key")
