"""Every query of the payments domain. A client's session is bound to its company, which scopes
them all; the functions below the repositories also serve the gateways' webhooks and
reconciliation, whose sessions are declared `across_companies` (a webhook names a tx_ref, not a
company)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import ColumnElement, Select, and_, delete, exists, func, or_, select
from sqlalchemy.orm import Session, joinedload, selectinload

from outfitter.core.errors import NotFound
from outfitter.db.tenancy import CompanyRepository, parse_uuid
from outfitter.equipment.repository import EquipmentRepository
from outfitter.models import (
    RETRIEVAL_STAGES_BEFORE_RECEIPT,
    STAGES,
    Equipment,
    EquipmentReservation,
    EquipmentStatus,
    Order,
    OrderItem,
    OrderKind,
    OrderStage,
    OrderStatus,
    PaymentMethod,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
    Wallet,
    WalletEntry,
)


@dataclass(frozen=True)
class TransactionFilters:
    """What the console's list and export filter by, beside the API's `status`."""

    kind: TransactionKind | None = None
    payment_method: PaymentMethod | None = None
    currency: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = []
        if self.kind is not None:
            found.append(Transaction.kind == self.kind)
        if self.payment_method is not None:
            found.append(Transaction.payment_method == self.payment_method)
        if self.currency is not None:
            found.append(Transaction.currency_code == self.currency)
        return found


class TransactionRepository(CompanyRepository[Transaction]):
    model = Transaction
    label = "Transaction"

    def get_by_ref(self, tx_ref: str) -> Transaction:
        transaction = self.session.scalars(
            self.select(joinedload(Transaction.country)).where(Transaction.tx_ref == tx_ref)
        ).one_or_none()
        if transaction is None:
            raise NotFound.record("Transaction")
        return transaction

    def listing(
        self, status: TransactionStatus | None, filters: TransactionFilters | None = None
    ) -> Select[Transaction]:
        statement = self.select().order_by(Transaction.created_at.desc(), Transaction.id.desc())
        if status is not None:
            statement = statement.where(Transaction.status == status)
        if filters is not None:
            statement = statement.where(*filters.conditions())
        return statement

    def chunk(
        self, listing: Select[Transaction], after: tuple[datetime, uuid.UUID] | None, limit: int
    ) -> list[Transaction]:
        """Up to `limit` transactions of `listing` (newest first) after the keyset `after`: an
        export's chunk."""
        if after is not None:
            created, last_id = after
            listing = listing.where(
                or_(
                    Transaction.created_at < created,
                    and_(Transaction.created_at == created, Transaction.id < last_id),
                )
            )
        return list(self.session.scalars(listing.limit(limit)))

    def fulfilled_since(self, since: datetime) -> Sequence[tuple[datetime, str, Decimal]]:
        """(settled_at, currency, total_amount) of each transaction fulfilled since `since`."""
        return self.session.execute(
            select(Transaction.settled_at, Transaction.currency_code, Transaction.total_amount).where(
                Transaction.status == TransactionStatus.FULFILLED, Transaction.settled_at >= since
            )
        ).all()  # type: ignore[return-value]  # settled_at is set on every fulfilled one


class OrderRepository(CompanyRepository[Order]):
    model = Order
    label = "Order"

    def listing(
        self,
        kind: OrderKind | None = None,
        status: OrderStatus | None = None,
        stage: OrderStage | None = None,
    ) -> Select[Order]:
        statement = self.select(joinedload(Order.country), selectinload(Order.items)).order_by(
            Order.created_at.desc(), Order.id.desc()
        )
        if kind is not None:
            statement = statement.where(Order.kind == kind)
        if status is not None:
            statement = statement.where(Order.status == status)
        if stage is not None:
            statement = statement.where(*at_stage(stage))
        return statement

    def awaiting_retrieval(self) -> int:
        """How many devices retrievals in progress have still to collect (not yet `received`)."""
        count = self.session.scalar(
            select(func.count())
            .select_from(OrderItem)
            .join(Order, Order.id == OrderItem.order_id)
            .where(
                Order.kind == OrderKind.RETRIEVAL,
                Order.status == OrderStatus.IN_PROGRESS,
                OrderItem.stage.in_(RETRIEVAL_STAGES_BEFORE_RECEIPT),
            )
        )
        return count or 0

    def get_full(self, order_id: str) -> Order:
        return self.get(order_id, joinedload(Order.country), selectinload(Order.items))

    def ids_by_transaction(self, transaction_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
        if not transaction_ids:
            return {}
        rows = self.session.execute(
            select(Order.transaction_id, Order.id).where(Order.transaction_id.in_(transaction_ids))
        ).all()
        return {transaction_id: order_id for transaction_id, order_id in rows}


def order_stage(kind: OrderKind, item_stages: Iterable[OrderStage]) -> OrderStage | None:
    """An order's stage: its least advanced item's (what it still waits for); `at_stage` is the
    same rule as a query."""
    path = STAGES[kind]
    return min(item_stages, key=path.index, default=None)


def at_stage(stage: OrderStage) -> tuple[ColumnElement[bool], ...]:
    """The orders whose least advanced item is at `stage`: an item there, and none behind it."""
    path = next(path for path in STAGES.values() if stage in path)
    behind = path[: path.index(stage)]
    conditions: list[ColumnElement[bool]] = [
        exists().where(OrderItem.order_id == Order.id, OrderItem.stage == stage)
    ]
    if behind:
        conditions.append(~exists().where(OrderItem.order_id == Order.id, OrderItem.stage.in_(behind)))
    return tuple(conditions)


def find_by_ref(session: Session, tx_ref: str) -> Transaction | None:
    """The transaction of a tx_ref: any company's in a session across companies (webhooks)."""
    return session.scalars(select(Transaction).where(Transaction.tx_ref == tx_ref)).one_or_none()


def lock_transaction(session: Session, transaction_id: uuid.UUID) -> Transaction:
    """Re-read the transaction under a row lock (PostgreSQL: FOR UPDATE; SQLite's writers already
    queue at BEGIN IMMEDIATE), so whoever holds it sees the status the last holder committed."""
    statement = (
        select(Transaction)
        .where(Transaction.id == transaction_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return session.scalars(statement).one()


def items_of(session: Session, transaction_id: uuid.UUID) -> Sequence[TransactionItem]:
    return session.scalars(
        select(TransactionItem)
        .where(TransactionItem.transaction_id == transaction_id)
        .order_by(TransactionItem.id)
    ).all()


def release_reservations(session: Session, transaction_id: uuid.UUID) -> None:
    session.execute(delete(EquipmentReservation).where(EquipmentReservation.transaction_id == transaction_id))


def pending_transactions(session: Session, limit: int, before: datetime | None = None) -> Sequence[uuid.UUID]:
    statement = select(Transaction.id).where(Transaction.status == TransactionStatus.PENDING)
    if before is not None:
        statement = statement.where(Transaction.created_at < before)
    return session.scalars(statement.order_by(Transaction.created_at).limit(limit)).all()


def lock_order(session: Session, order_id: uuid.UUID) -> Order | None:
    """The order with its country and items, re-read under a row lock: stage moves of one order
    queue, so each sees the stages the last one committed."""
    statement = (
        select(Order)
        .where(Order.id == order_id)
        .options(joinedload(Order.country), selectinload(Order.items))
        .with_for_update(of=Order)
        .execution_options(populate_existing=True)
    )
    return session.scalars(statement).unique().one_or_none()


def load_order(session: Session, order_id: uuid.UUID) -> Order:
    """The order with what its answer needs (after a write: fresh from the database)."""
    statement = (
        select(Order)
        .where(Order.id == order_id)
        .options(joinedload(Order.country), selectinload(Order.items))
        .execution_options(populate_existing=True)
    )
    return session.scalars(statement).unique().one()


def open_retrieval_equipment_ids(session: Session, equipment_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Devices named by a retrieval still in progress and not yet received."""
    return set(EquipmentRepository(session).retrieving_orders(equipment_ids))


def order_id_of(session: Session, transaction_id: uuid.UUID) -> uuid.UUID | None:
    return session.scalar(select(Order.id).where(Order.transaction_id == transaction_id))


__all__ = [
    "OrderRepository",
    "TransactionRepository",
    "find_by_ref",
    "lock_transaction",
    "parse_uuid",
]


def lock_devices(session: Session, ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID, Equipment]:
    """These devices, locked in id order (as initiates and moves lock them) and read afresh."""
    statement = (
        select(Equipment)
        .where(Equipment.id.in_(sorted({device for device in ids if device is not None})))
        .order_by(Equipment.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {equipment.id: equipment for equipment in session.scalars(statement)}


def held_by(equipment: Equipment | None, employee_id: uuid.UUID | None) -> bool:
    """Whether a device to retrieve is still Assigned to the employee it is retrieved from."""
    return (
        equipment is not None
        and equipment.status == EquipmentStatus.ASSIGNED
        and equipment.assignee_id == employee_id
    )


def wallet_balances(session: Session) -> Sequence[Wallet]:
    return session.scalars(select(Wallet).order_by(Wallet.currency_code)).all()


def recent_wallet_entries(
    session: Session, limit: int = 20, currency: str | None = None, offset: int = 0
) -> Sequence[tuple[WalletEntry, str, str | None]]:
    """The newest entries (of one currency's wallet, if given), each with its currency and the
    tx_ref of its transaction (if any): the reference clients know a transaction by."""
    statement = (
        select(WalletEntry, Wallet.currency_code, Transaction.tx_ref)
        .join(Wallet, Wallet.id == WalletEntry.wallet_id)
        .outerjoin(Transaction, Transaction.id == WalletEntry.transaction_id)
        .order_by(WalletEntry.created_at.desc(), WalletEntry.id.desc())
        .limit(limit)
        .offset(offset)
    )
    if currency is not None:
        statement = statement.where(Wallet.currency_code == currency)
    rows = session.execute(statement).all()
    return [(entry, code, tx_ref) for entry, code, tx_ref in rows]
