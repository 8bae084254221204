"""Every table, one module per domain, each with the StrEnums of the values its columns hold.

The models import only `outfitter.db`; every domain package imports its tables (and any other
domain's it reads) from here, so the domains never import each other for a table. Importing this
package registers every table on `Base.metadata`, which the migrations compare against.
"""

from outfitter.db.base import Base
from outfitter.models.catalog import (
    Asset,
    AssetModel,
    AssetPricing,
    AssetSpecification,
    AssetStatus,
    Category,
    Country,
    Currency,
    CurrencyStatus,
)
from outfitter.models.equipment import (
    Equipment,
    EquipmentEvent,
    EquipmentHistory,
    EquipmentSource,
    EquipmentState,
    EquipmentStatus,
    EquipmentType,
    fold_spec,
)
from outfitter.models.events import Event, EventType
from outfitter.models.payments import (
    EquipmentReservation,
    FeeSchedule,
    GatewayPaymentStatus,
    Order,
    OrderItem,
    OrderStatus,
    PaymentAnomaly,
    PaymentAnomalyKind,
    PaymentMethod,
    SandboxPayment,
    Transaction,
    TransactionItem,
    TransactionKind,
    TransactionStatus,
    Wallet,
    WalletEntry,
    WalletEntryKind,
    WebhookEvent,
    WebhookOutcome,
)
from outfitter.models.people import Department, Employee, MembershipStatus, UserDepartment
from outfitter.models.tenants import ApiToken, Company, IdempotencyRecord
from outfitter.models.webhooks import (
    PING_EVENT_TYPE,
    DeliveryStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WorkerJob,
)

metadata = Base.metadata

__all__ = [
    "PING_EVENT_TYPE",
    "ApiToken",
    "Asset",
    "AssetModel",
    "AssetPricing",
    "AssetSpecification",
    "AssetStatus",
    "Category",
    "Company",
    "Country",
    "Currency",
    "CurrencyStatus",
    "DeliveryStatus",
    "Department",
    "Employee",
    "Equipment",
    "EquipmentEvent",
    "EquipmentHistory",
    "EquipmentReservation",
    "EquipmentSource",
    "EquipmentState",
    "EquipmentStatus",
    "EquipmentType",
    "Event",
    "EventType",
    "FeeSchedule",
    "GatewayPaymentStatus",
    "IdempotencyRecord",
    "MembershipStatus",
    "Order",
    "OrderItem",
    "OrderStatus",
    "PaymentAnomaly",
    "PaymentAnomalyKind",
    "PaymentMethod",
    "SandboxPayment",
    "Transaction",
    "TransactionItem",
    "TransactionKind",
    "TransactionStatus",
    "UserDepartment",
    "Wallet",
    "WalletEntry",
    "WalletEntryKind",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookOutcome",
    "WorkerJob",
    "fold_spec",
    "metadata",
]
