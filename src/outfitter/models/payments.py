"""Transactions, their items and reservations, orders, the fee schedule, wallets and their ledger,
and the record of every webhook event received."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Numeric, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from outfitter.db.base import (
    Base,
    ChangeTracked,
    CompanyOwned,
    IdMixin,
    TimestampMixin,
    company_key,
    company_reference,
    str_enum,
    utcnow,
)
from outfitter.models.catalog import Country

RATE = Numeric(9, 6)  # fee percentages, e.g. 2.500000 for 2.5 %


class TransactionKind(StrEnum):
    CATALOG = "catalog"  # buys catalog assets: the order makes new equipment
    STORAGE = "storage"  # onboards storage equipment to employees: fees only
    OFFBOARD = "offboard"  # retrieves devices from employees: fees only, a retrieval order


class PaymentMethod(StrEnum):
    CARD = "Card"  # through the payment gateway's checkout
    CREDIT = "Credit"  # from the company's wallet, at once


class TransactionStatus(StrEnum):
    """Pending until settled (`payments.fulfilment.settle`), then one of the others for good."""

    PENDING = "Pending"
    FULFILLED = "Fulfilled"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    EXPIRED = "Expired"


class OrderStatus(StrEnum):
    """An order exists only for a fulfilled transaction; then it is tracked to the door."""

    IN_PROGRESS = "in_progress"  # some item has not reached its kind's last stage
    COMPLETED = "completed"  # every item reached its last stage
    CANCELLED = "cancelled"  # an operator cancelled it (`outfitter orders cancel`)


class OrderKind(StrEnum):
    PURCHASE = "purchase"  # catalog assets bought: new equipment
    STORAGE_ONBOARDING = "storage_onboarding"  # storage equipment sent to employees
    RETRIEVAL = "retrieval"  # devices collected from employees (offboarding)


class OrderStage(StrEnum):
    """Every stage of every kind; `STAGES[kind]` is the ordered path of one kind."""

    ORDER_PLACED = "order_placed"
    ORDER_CONFIRMED = "order_confirmed"
    PRODUCT_SETUP = "product_setup"
    PRODUCT_PACKAGED = "product_packaged"
    ORDER_IN_TRANSIT = "order_in_transit"
    ORDER_DELIVERED = "order_delivered"
    RETRIEVAL_SCHEDULED = "retrieval_scheduled"
    PICKED_UP = "picked_up"
    IN_TRANSIT = "in_transit"
    RECEIVED = "received"
    INSPECTED = "inspected"


DELIVERY_STAGES: tuple[OrderStage, ...] = (
    OrderStage.ORDER_PLACED,
    OrderStage.ORDER_CONFIRMED,
    OrderStage.PRODUCT_SETUP,
    OrderStage.PRODUCT_PACKAGED,
    OrderStage.ORDER_IN_TRANSIT,
    OrderStage.ORDER_DELIVERED,
)
RETRIEVAL_STAGES: tuple[OrderStage, ...] = (
    OrderStage.RETRIEVAL_SCHEDULED,
    OrderStage.PICKED_UP,
    OrderStage.IN_TRANSIT,
    OrderStage.RECEIVED,
    OrderStage.INSPECTED,
)
# A retrieval item at one of these is on its way back: its device is still with the employee but
# held by the order (no move until it is received or the order is cancelled).
RETRIEVAL_STAGES_BEFORE_RECEIPT: tuple[OrderStage, ...] = RETRIEVAL_STAGES[
    : RETRIEVAL_STAGES.index(OrderStage.RECEIVED)
]
STAGES: dict[OrderKind, tuple[OrderStage, ...]] = {
    OrderKind.PURCHASE: DELIVERY_STAGES,
    OrderKind.STORAGE_ONBOARDING: DELIVERY_STAGES,
    OrderKind.RETRIEVAL: RETRIEVAL_STAGES,
}
ORDER_KIND_OF: dict[TransactionKind, OrderKind] = {
    TransactionKind.CATALOG: OrderKind.PURCHASE,
    TransactionKind.STORAGE: OrderKind.STORAGE_ONBOARDING,
    TransactionKind.OFFBOARD: OrderKind.RETRIEVAL,
}


class RetrievalDestination(StrEnum):
    STORAGE = "storage"  # kept in Outfitter's storage: In_Storage once received
    OFFICE = "office"  # returned to the company: Unassigned once received


class WalletEntryKind(StrEnum):
    CREDIT = "credit"
    DEBIT = "debit"
    REFUND = "refund"


class GatewayPaymentStatus(StrEnum):
    """What a gateway says of a payment (and what the sandbox gateway's book records)."""

    SUCCESSFUL = "successful"
    DECLINED = "declined"
    PENDING = "pending"


class WebhookOutcome(StrEnum):
    """What receiving a webhook event did: recorded first as received, then the outcome."""

    RECEIVED = "received"
    DUPLICATE = "duplicate"  # answered, never stored: the event was recorded before
    UNKNOWN_TX_REF = "unknown_tx_ref"
    ALREADY_SETTLED = "already_settled"
    # The transaction's status after settling, in lower case.
    PENDING = "pending"
    FULFILLED = "fulfilled"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @classmethod
    def settled_as(cls, status: TransactionStatus) -> WebhookOutcome:
        return cls(status.value.lower())


class FeeSchedule(IdMixin, TimestampMixin, Base):
    __tablename__ = "fee_schedules"

    currency_code: Mapped[str] = mapped_column(String(3), unique=True)
    insurance_percent: Mapped[Decimal] = mapped_column(RATE)
    platform_percent: Mapped[Decimal] = mapped_column(RATE)
    gateway_percent: Mapped[Decimal] = mapped_column(RATE)  # Card payments only
    onboarding_fee_per_device: Mapped[Decimal]
    device_config_fee_per_device: Mapped[Decimal]
    # Offboarding, per device retrieved (storage: per device kept in storage).
    retrieval_fee_per_device: Mapped[Decimal]
    inspection_fee_per_device: Mapped[Decimal]
    storage_fee_per_device: Mapped[Decimal]


class Transaction(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "transactions"
    __table_args__ = (
        *ChangeTracked.company_indexes("transactions"),
        Index("ix_transactions_status_expires", "status", "expires_at"),
        company_key("transactions"),
    )

    tx_ref: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[TransactionKind] = mapped_column(str_enum(TransactionKind, 20))
    payment_method: Mapped[PaymentMethod] = mapped_column(str_enum(PaymentMethod, 20))
    gateway: Mapped[str | None] = mapped_column(String(30))  # the name of the gateway, for Card
    status: Mapped[TransactionStatus] = mapped_column(str_enum(TransactionStatus, 20))
    country_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("countries.id"))
    currency_code: Mapped[str] = mapped_column(String(3))
    amount: Mapped[Decimal]
    insurance: Mapped[Decimal]
    gateway_fee: Mapped[Decimal]
    onboarding_fee: Mapped[Decimal]
    device_config_fee: Mapped[Decimal]
    platform_fee: Mapped[Decimal]
    retrieval_fee: Mapped[Decimal]
    inspection_fee: Mapped[Decimal]
    storage_fee: Mapped[Decimal]
    total_amount: Mapped[Decimal]
    link: Mapped[str | None] = mapped_column(String(1000))
    redirect_url: Mapped[str | None] = mapped_column(String(2000))
    gateway_reference: Mapped[str | None] = mapped_column(String(200))
    failure_reason: Mapped[str | None] = mapped_column(String(500))
    expires_at: Mapped[datetime]
    settled_at: Mapped[datetime | None]  # when it left Pending
    actor: Mapped[str | None] = mapped_column(String(200))

    country: Mapped[Country] = relationship(lazy="raise")
    items: Mapped[list[TransactionItem]] = relationship(
        back_populates="transaction", lazy="raise", foreign_keys="TransactionItem.transaction_id"
    )


class TransactionItem(IdMixin, CompanyOwned, Base):
    __tablename__ = "transaction_items"
    __table_args__ = (
        *company_reference("transaction_items", "transaction_id", "transactions", ondelete="CASCADE"),
        *company_reference("transaction_items", "employee_id", "employees", ondelete="SET NULL"),
        *company_reference("transaction_items", "equipment_id", "equipment"),
    )

    transaction_id: Mapped[uuid.UUID] = mapped_column(index=True)
    employee_id: Mapped[uuid.UUID | None]
    employee_name: Mapped[str] = mapped_column(String(200))
    asset_pricing_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("asset_pricing.id"))
    asset_spec_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("asset_specifications.id"))
    equipment_id: Mapped[uuid.UUID | None]  # storage, offboard
    destination: Mapped[RetrievalDestination | None] = mapped_column(str_enum(RetrievalDestination, 20))
    quantity: Mapped[int] = mapped_column(default=1)
    unit_price: Mapped[Decimal]

    transaction: Mapped[Transaction] = relationship(
        back_populates="items", lazy="raise", foreign_keys="TransactionItem.transaction_id"
    )


class EquipmentReservation(IdMixin, CompanyOwned, Base):
    """Storage equipment held by a Pending transaction. The unique equipment_id is what makes two
    racing initiates naming one device end with one winner and one 409."""

    __tablename__ = "equipment_reservations"
    __table_args__ = (
        *company_reference("equipment_reservations", "equipment_id", "equipment", ondelete="CASCADE"),
        *company_reference("equipment_reservations", "transaction_id", "transactions", ondelete="CASCADE"),
    )

    equipment_id: Mapped[uuid.UUID] = mapped_column(unique=True)
    transaction_id: Mapped[uuid.UUID] = mapped_column(index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Order(IdMixin, ChangeTracked, CompanyOwned, Base):
    __tablename__ = "orders"
    __table_args__ = (
        *ChangeTracked.company_indexes("orders"),
        company_key("orders"),
        *company_reference("orders", "transaction_id", "transactions"),
    )

    # Unique: one transaction makes at most one order, whatever races to fulfil it.
    transaction_id: Mapped[uuid.UUID] = mapped_column(unique=True)
    tx_ref: Mapped[str] = mapped_column(String(64))
    kind: Mapped[OrderKind] = mapped_column(str_enum(OrderKind, 30))
    status: Mapped[OrderStatus] = mapped_column(str_enum(OrderStatus, 20))
    payment_method: Mapped[PaymentMethod] = mapped_column(str_enum(PaymentMethod, 20))
    country_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("countries.id"))
    currency_code: Mapped[str] = mapped_column(String(3))
    total_amount: Mapped[Decimal]

    country: Mapped[Country] = relationship(lazy="raise")
    items: Mapped[list[OrderItem]] = relationship(
        back_populates="order", lazy="raise", foreign_keys="OrderItem.order_id"
    )


class OrderItem(IdMixin, CompanyOwned, Base):
    __tablename__ = "order_items"
    __table_args__ = (
        *company_reference("order_items", "order_id", "orders", ondelete="CASCADE"),
        *company_reference("order_items", "employee_id", "employees", ondelete="SET NULL"),
        *company_reference("order_items", "equipment_id", "equipment", ondelete="SET NULL"),
    )

    order_id: Mapped[uuid.UUID] = mapped_column(index=True)
    employee_id: Mapped[uuid.UUID | None] = mapped_column(index=True)
    employee_name: Mapped[str] = mapped_column(String(200))
    asset_spec_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("asset_specifications.id"))
    asset_pricing_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("asset_pricing.id"))
    price: Mapped[Decimal]
    equipment_id: Mapped[uuid.UUID | None]
    destination: Mapped[RetrievalDestination | None] = mapped_column(str_enum(RetrievalDestination, 20))
    stage: Mapped[OrderStage] = mapped_column(str_enum(OrderStage, 30))
    # Every stage reached, oldest first: [{"stage", "at" (ISO 8601 UTC), "note"}]. A JSON column
    # rather than a table: it is only ever read and written whole with its item, so a page of
    # orders stays two statements. Assign a new list to change it (JSON is not mutation-tracked).
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)

    order: Mapped[Order] = relationship(
        back_populates="items", lazy="raise", foreign_keys="OrderItem.order_id"
    )


class Wallet(IdMixin, TimestampMixin, CompanyOwned, Base):
    __tablename__ = "wallets"
    __table_args__ = (
        UniqueConstraint("company_id", "currency_code"),
        company_key("wallets"),
        CheckConstraint("balance >= 0", name="balance_not_negative"),
    )

    currency_code: Mapped[str] = mapped_column(String(3))
    balance: Mapped[Decimal]


class WalletEntry(IdMixin, CompanyOwned, Base):
    """Append-only ledger: the wallet's balance always equals the sum of its entries."""

    __tablename__ = "wallet_entries"
    __table_args__ = (
        Index("ix_wallet_entries_wallet_created", "wallet_id", "created_at"),
        *company_reference("wallet_entries", "wallet_id", "wallets", ondelete="CASCADE"),
        *company_reference("wallet_entries", "transaction_id", "transactions"),
    )

    wallet_id: Mapped[uuid.UUID]
    amount: Mapped[Decimal]  # positive credit, negative debit
    balance_after: Mapped[Decimal]
    kind: Mapped[WalletEntryKind] = mapped_column(str_enum(WalletEntryKind, 20))
    transaction_id: Mapped[uuid.UUID | None]
    description: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PaymentAnomalyKind(StrEnum):
    LATE_PAYMENT = "late_payment"  # paid after the transaction left Pending: to fulfil or refund
    OVERPAYMENT = "overpayment"  # paid more than was due: the excess is to refund
    # paid for devices that had left the state the payment was for (a backstop: moves of reserved
    # devices are refused): their share of the total is to refund
    DEVICE_UNAVAILABLE = "device_unavailable"


class PaymentAnomaly(IdMixin, CompanyOwned, Base):
    """Money a gateway took that no order accounts for, kept for an operator (`outfitter payments
    anomalies`): never lost, never silently accepted."""

    __tablename__ = "payment_anomalies"
    __table_args__ = (
        UniqueConstraint("transaction_id", "kind", "gateway_reference"),
        *company_reference("payment_anomalies", "transaction_id", "transactions", ondelete="CASCADE"),
    )

    transaction_id: Mapped[uuid.UUID]
    tx_ref: Mapped[str] = mapped_column(String(64))
    kind: Mapped[PaymentAnomalyKind] = mapped_column(str_enum(PaymentAnomalyKind, 20))
    amount: Mapped[Decimal]  # what was paid (late) or paid beyond the total (over)
    currency_code: Mapped[str] = mapped_column(String(3))
    gateway_reference: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    resolved_at: Mapped[datetime | None]


class WebhookEvent(IdMixin, Base):
    __tablename__ = "webhook_events"
    __table_args__ = (UniqueConstraint("gateway", "event_key"),)

    gateway: Mapped[str] = mapped_column(String(30))
    event_key: Mapped[str] = mapped_column(String(200))
    tx_ref: Mapped[str | None] = mapped_column(String(64), index=True)
    outcome: Mapped[WebhookOutcome] = mapped_column(str_enum(WebhookOutcome, 50))
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class SandboxPayment(IdMixin, Base):
    """The sandbox gateway's own record of what a payer did at its checkout page. It stands apart
    from the transaction, as a real gateway's books would: the service asks it, never assumes."""

    __tablename__ = "sandbox_payments"

    tx_ref: Mapped[str] = mapped_column(String(64), unique=True)
    status: Mapped[GatewayPaymentStatus] = mapped_column(str_enum(GatewayPaymentStatus, 20))
    amount: Mapped[Decimal]
    currency_code: Mapped[str] = mapped_column(String(3))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
