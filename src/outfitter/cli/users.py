"""Console users: `user invite`."""

from __future__ import annotations

from typing import Annotated

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, iso_or_none, parse_id, unit_of_work

user_app = typer.Typer(help="People who sign in to the web console.", no_args_is_help=True)
app.add_typer(user_app, name="user")


@user_app.command("invite")
def user_invite(
    company_id: str,
    email: str,
    role: Annotated[str, typer.Option("--role", help="admin (everything) or viewer (read only)")] = "viewer",
    as_json: JsonFlag = False,
) -> None:
    """Invite EMAIL to COMPANY_ID's console: prints a one-time link, valid 72 hours, where they set
    their password. Inviting again someone who has not signed up replaces their link."""
    from outfitter.config import get_settings
    from outfitter.console.accounts import InviteRefused, invite, sign_in_link
    from outfitter.models import Company, ConsoleRole

    if role not in set(ConsoleRole):
        fail("--role takes admin or viewer")
    company_uuid = parse_id(company_id, "the company id")
    with unit_of_work() as session:
        if session.get(Company, company_uuid) is None:
            fail(f"no company with id {company_id}")
        try:
            invited = invite(session, company_uuid, email, ConsoleRole(role))
        except InviteRefused as exc:
            fail(str(exc))
    link = sign_in_link(get_settings().public_url, invited.token)
    payload = {
        "user_id": str(invited.user_id),
        "email": invited.email,
        "role": invited.role.value,
        "link": link,
        "expires_at": iso_or_none(invited.expires_at),
    }
    emit(
        as_json, payload, f"invited {invited.email} ({invited.role.value}); the link, valid 72 hours:\n{link}"
    )
