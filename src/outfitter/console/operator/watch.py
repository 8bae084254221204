"""What an operator watches: payment anomalies to resolve, the webhook queue (`worker.status`, as
`outfitter status` and /metrics read it), and the operators' own activity (the events recorded
under an `operator:` actor, every company's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from sqlalchemy import select

from outfitter.console.operator import actions
from outfitter.console.operator.accounts import ACTOR_PREFIX
from outfitter.console.operator.web import MOUNT_PATH, operator_work, page, render
from outfitter.console.web import redirect
from outfitter.db.base import utcnow
from outfitter.models import Company, Event, PaymentAnomaly
from outfitter.worker.status import failing_endpoints, queue_state, workers

router = APIRouter(include_in_schema=False)
FormText = Annotated[str, Form(max_length=1000)]
ACTIVITY_SHOWN = 100


@router.get("/anomalies")
@page
def anomalies_page(request: Request) -> Response:
    show_all = request.query_params.get("show") == "all"
    with operator_work(request) as work:
        statement = (
            select(PaymentAnomaly, Company.name)
            .join(Company, Company.id == PaymentAnomaly.company_id)
            .order_by(PaymentAnomaly.created_at.desc())
            .limit(200)
        )
        if not show_all:
            statement = statement.where(PaymentAnomaly.resolved_at.is_(None))
        rows = work.session.execute(statement).all()
        return render(
            request,
            "anomalies.html",
            user=work.user,
            nav="anomalies",
            rows=rows,
            show_all=show_all,
            saved=request.query_params.get("saved", ""),
        )


@router.post("/anomalies/{anomaly_id}/resolve")
@page
def resolve(request: Request, anomaly_id: str, csrf_token: FormText = "") -> Response:
    with operator_work(request, {"csrf_token": csrf_token}) as work:
        actions.resolve_anomaly(work.session, anomaly_id, work.user.actor)
    return redirect(f"{MOUNT_PATH}/anomalies?saved=1")


@router.get("/queue")
@page
def queue_page(request: Request) -> Response:
    threshold = request.app.state.settings.worker_lag_threshold_seconds
    with operator_work(request) as work:
        now = utcnow()
        return render(
            request,
            "queue.html",
            user=work.user,
            nav="queue",
            queue=queue_state(work.session, now),
            workers=workers(work.session, now),
            failing=failing_endpoints(work.session),
            threshold=threshold,
        )


@router.get("/activity")
@page
def activity_page(request: Request) -> Response:
    who = (request.query_params.get("operator") or "").strip().lower()[:320]
    with operator_work(request) as work:
        prefix = f"{ACTOR_PREFIX}{who}" if who else ACTOR_PREFIX
        statement = (
            select(Event, Company.name)
            .join(Company, Company.id == Event.company_id)
            .where(Event.actor.startswith(prefix, autoescape=True) if not who else Event.actor == prefix)
            .order_by(Event.created_at.desc(), Event.id.desc())
            .limit(ACTIVITY_SHOWN)
        )
        return render(
            request,
            "activity.html",
            user=work.user,
            nav="activity",
            rows=work.session.execute(statement).all(),
            who=who,
            shown=ACTIVITY_SHOWN,
        )
