"""The employees list's filter as CSV: the API's exporter (`people.export`, the same bytes as
`GET /client/employees/export` with those filters), streamed in sessions bound to the user's
company."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from outfitter.console.pages import page
from outfitter.console.people import EmployeeQuery
from outfitter.console.web import console_work, error_page
from outfitter.core.errors import ValidationFailed
from outfitter.csvio.writer import csv_response
from outfitter.db.tenancy import bind_company, reads_only
from outfitter.people import export
from outfitter.people import service as employee_service

router = APIRouter(include_in_schema=False)


@router.get("/employees/export")
@page
def export_employees(request: Request) -> Response:
    query = EmployeeQuery.parse(request.query_params)
    with console_work(request) as work:
        try:
            filters = employee_service.resolve_filters(
                work.session,
                country=query.country or None,
                department_id=query.department or None,
                search=query.q or None,
            )
        except ValidationFailed as exc:
            details = " ".join(" ".join(messages) for messages in (exc.errors or {}).values())
            return error_page(request, 422, details or exc.message, work.user)
        company_id, sessions = work.user.company_id, request.app.state.sessionmaker

    def open_session() -> Session:
        session = reads_only(sessions())
        bind_company(session, company_id)
        return session

    chunks = export.employee_chunks(open_session, filters)
    return csv_response(f"employees-{datetime.now(UTC):%Y-%m-%d}.csv", export.COLUMNS, chunks)
