"""Operators of the operator console (/operator): `operator invite`, `deactivate` and `list`."""

from __future__ import annotations

import typer

from outfitter.cli.common import JsonFlag, app, emit, fail, iso_or_none, unit_of_work

operator_app = typer.Typer(help="Outfitter's own staff, who sign in at /operator.", no_args_is_help=True)
app.add_typer(operator_app, name="operator")


@operator_app.command("invite")
def operator_invite(email: str, as_json: JsonFlag = False) -> None:
    """Invite EMAIL as an operator: prints a one-time link, valid 72 hours, where they add the
    TOTP key to their app and set their password. Inviting again someone who has not signed up
    replaces their link and key. A company's console user cannot be an operator."""
    from outfitter.config import get_settings
    from outfitter.console.operator.accounts import InviteRefused, invite, invite_link

    with unit_of_work() as session:
        try:
            invited = invite(session, email)
        except InviteRefused as exc:
            fail(str(exc))
    link = invite_link(get_settings().public_url, invited.token)
    payload = {
        "user_id": str(invited.user_id),
        "email": invited.email,
        "link": link,
        "expires_at": iso_or_none(invited.expires_at),
    }
    emit(as_json, payload, f"invited operator {invited.email}; the link, valid 72 hours:\n{link}")


@operator_app.command("deactivate")
def operator_deactivate(email: str, as_json: JsonFlag = False) -> None:
    """Stop EMAIL from signing in to the operator console, ending their sessions now (a lost
    device: deactivate, then invite again)."""
    from outfitter.console.operator.accounts import InviteRefused, deactivate

    with unit_of_work() as session:
        try:
            user = deactivate(session, email)
        except InviteRefused as exc:
            fail(str(exc))
        payload = {"email": user.email, "status": user.status}
    emit(as_json, payload, f"operator {payload['email']} deactivated; their sessions are over")


@operator_app.command("list")
def operator_list(as_json: JsonFlag = False) -> None:
    """List the operators: email, state (invited, active, deactivated), since when."""
    from outfitter.console.operator.accounts import operators

    with unit_of_work() as session:
        found = [
            {
                "id": str(user.id),
                "email": user.email,
                "status": user.status,
                "created_at": iso_or_none(user.created_at),
            }
            for user in operators(session)
        ]
    lines = [f"{each['email']}  {each['status']}  (since {each['created_at']})" for each in found]
    emit(as_json, {"operators": found}, "\n".join(lines) or "no operators")
