"""The asset catalog: `catalog import`."""

from __future__ import annotations

from pathlib import Path

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, progress_bar, read_limited, unit_of_work

catalog_app = typer.Typer(help="The asset catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")


@catalog_app.command("import")
def catalog_import(file: Path, as_json: JsonFlag = False) -> None:
    """Load a catalog JSON file; importing the same file again creates nothing new."""
    from outfitter.catalog.importer import (
        MAX_CATALOG_BYTES,
        CatalogImportError,
        import_catalog,
        parse_catalog,
    )
    from outfitter.core.money import MAX_AMOUNT
    from outfitter.payments.fees import beyond_one_charge, without_schedule

    data = read_limited(file, MAX_CATALOG_BYTES)
    try:
        catalog = parse_catalog(data, str(file))
    except CatalogImportError as exc:
        fail(str(exc))  # it names the file
    prices = {
        (price.currency.upper(), price.amount)
        for asset in catalog.assets
        for spec in asset.specifications
        for price in spec.prices
    }
    priced_in = {code for code, _ in prices}
    try:
        with unit_of_work() as session, progress_bar() as bar:
            task = bar.add_task(f"Importing {file.name}", total=len(catalog.assets))
            summary = import_catalog(session, catalog, progress=lambda done: bar.advance(task, done))
            unpayable = without_schedule(session, priced_in)
            too_dear = sorted(beyond_one_charge(session, prices))
    except CatalogImportError as exc:
        fail(f"{file}: {exc}")  # nothing of the file was written
    payload = vars(summary)
    emit(
        as_json,
        {
            **payload,
            "currencies_without_fees": unpayable,
            "prices_beyond_one_charge": [f"{code} {amount}" for code, amount in too_dear],
        },
        ", ".join(f"{key.replace('_', ' ')}: {value}" for key, value in payload.items()),
    )
    if too_dear:  # imported all the same, as the prices the file gives
        listed = ", ".join(f"{code} {amount:,}" for code, amount in too_dear)
        typer.echo(
            f"warning: no order can pay for a device priced {listed}: with its fees one device alone "
            f"comes to {MAX_AMOUNT:,} or more, and one transaction charges less",
            err=True,
        )
    if unpayable:  # imported all the same: the operator may set the fees next
        codes = ", ".join(unpayable)
        typer.echo(
            f"warning: no fee schedule for {codes}: prices in it are listed, but orders paid in it are "
            "refused until 'outfitter fees set CURRENCY ...' gives it one",
            err=True,
        )
