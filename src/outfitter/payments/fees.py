"""The fee schedule (per currency, changeable by operators) and the fee computation."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.catalog.reference import minor_units
from outfitter.core.errors import ValidationFailed
from outfitter.core.money import percent_of, round_money, storable
from outfitter.models import FeeSchedule, PaymentMethod

# Documented in docs/payments.md. Percentages apply to the equipment amount (insurance, platform)
# or to the whole charge before the gateway fee (gateway, Card only); device fees are per device.
DEFAULT_PERCENTS = {
    "insurance_percent": Decimal("3"),
    "platform_percent": Decimal("5"),
    "gateway_percent": Decimal("1.5"),
}
DEFAULT_DEVICE_FEES: dict[str, tuple[str, str]] = {
    # currency: (onboarding fee per device, device configuration fee per device)
    "USD": ("25.00", "15.00"),
    "EUR": ("23.00", "14.00"),
    "GBP": ("20.00", "12.00"),
    "CAD": ("34.00", "20.00"),
    "NGN": ("15000.00", "10000.00"),
    "KES": ("3500.00", "2000.00"),
    "GHS": ("300.00", "180.00"),
    "ZAR": ("450.00", "270.00"),
}
DEFAULT_OFFBOARD_FEES: dict[str, tuple[str, str, str]] = {
    # currency: (retrieval, inspection, storage) per device; storage only for devices kept there
    "USD": ("40.00", "20.00", "30.00"),
    "EUR": ("37.00", "18.00", "28.00"),
    "GBP": ("32.00", "16.00", "24.00"),
    "CAD": ("54.00", "27.00", "40.00"),
    "NGN": ("25000.00", "12000.00", "18000.00"),
    "KES": ("5500.00", "2700.00", "4000.00"),
    "GHS": ("480.00", "240.00", "360.00"),
    "ZAR": ("720.00", "360.00", "540.00"),
}


def ensure_default_fee_schedules(session: Session) -> int:
    """Add the default schedule for every currency that has none; never overwrites an operator's."""
    present = set(session.scalars(select(FeeSchedule.currency_code)))
    added = 0
    for code, (onboarding, config) in DEFAULT_DEVICE_FEES.items():
        if code in present:
            continue
        retrieval, inspection, storage = DEFAULT_OFFBOARD_FEES[code]
        session.add(
            FeeSchedule(
                currency_code=code,
                onboarding_fee_per_device=Decimal(onboarding),
                device_config_fee_per_device=Decimal(config),
                retrieval_fee_per_device=Decimal(retrieval),
                inspection_fee_per_device=Decimal(inspection),
                storage_fee_per_device=Decimal(storage),
                **DEFAULT_PERCENTS,
            )
        )
        added += 1
    session.flush()
    return added


def without_schedule(session: Session, currency_codes: set[str]) -> list[str]:
    """Which of `currency_codes` have no fee schedule (orders in them are refused), sorted."""
    scheduled = set(
        session.scalars(
            select(FeeSchedule.currency_code).where(FeeSchedule.currency_code.in_(currency_codes))
        )
    )
    return sorted(currency_codes - scheduled)


def beyond_one_charge(session: Session, prices: set[tuple[str, Decimal]]) -> set[tuple[str, Decimal]]:
    """Which `prices` (currency code, amount) no order can pay even for one device: with their
    currency's fees, by Card, the total reaches what one transaction may charge (MAX_AMOUNT). A
    currency without a schedule is left out (`without_schedule` names those)."""
    codes = {code for code, _ in prices}
    schedules = {
        schedule.currency_code: schedule
        for schedule in session.scalars(select(FeeSchedule).where(FeeSchedule.currency_code.in_(codes)))
    }
    return {
        (code, amount)
        for code, amount in prices
        if code in schedules
        and not storable(
            compute_charges(schedules[code], minor_units(code), amount, 1, PaymentMethod.CARD).total_amount
        )
    }


def schedule_for(session: Session, currency_code: str, field: str) -> FeeSchedule:
    schedule = session.scalars(
        select(FeeSchedule).where(FeeSchedule.currency_code == currency_code)
    ).one_or_none()
    if schedule is None:
        raise ValidationFailed.field(
            field, f"Orders cannot be paid in {currency_code} yet: it has no fee schedule."
        )
    return schedule


@dataclass(frozen=True)
class Charges:
    amount: Decimal
    insurance: Decimal
    gateway_fee: Decimal
    onboarding_fee: Decimal
    device_config_fee: Decimal
    platform_fee: Decimal
    # Offboarding only; zero on the other kinds.
    retrieval_fee: Decimal = Decimal(0)
    inspection_fee: Decimal = Decimal(0)
    storage_fee: Decimal = Decimal(0)

    @property
    def total_amount(self) -> Decimal:
        return (
            self.amount
            + self.insurance
            + self.gateway_fee
            + self.onboarding_fee
            + self.device_config_fee
            + self.platform_fee
            + self.retrieval_fee
            + self.inspection_fee
            + self.storage_fee
        )


def compute_charges(
    schedule: FeeSchedule, minor_units: int, amount: Decimal, devices: int, payment_method: PaymentMethod
) -> Charges:
    amount = round_money(amount, minor_units)
    insurance = percent_of(amount, schedule.insurance_percent, minor_units)
    platform_fee = percent_of(amount, schedule.platform_percent, minor_units)
    onboarding_fee = round_money(schedule.onboarding_fee_per_device * devices, minor_units)
    device_config_fee = round_money(schedule.device_config_fee_per_device * devices, minor_units)
    before_gateway = amount + insurance + platform_fee + onboarding_fee + device_config_fee
    gateway_fee = (
        percent_of(before_gateway, schedule.gateway_percent, minor_units)
        if payment_method == PaymentMethod.CARD
        else round_money(Decimal(0), minor_units)
    )
    return Charges(amount, insurance, gateway_fee, onboarding_fee, device_config_fee, platform_fee)


def compute_offboard_charges(
    schedule: FeeSchedule, minor_units: int, devices: int, to_storage: int, payment_method: PaymentMethod
) -> Charges:
    """Retrieval and inspection per device, storage per device kept in storage, and the gateway
    fee on Card (a percentage of the rest, as for the other kinds). No equipment amount."""
    zero = round_money(Decimal(0), minor_units)
    retrieval_fee = round_money(schedule.retrieval_fee_per_device * devices, minor_units)
    inspection_fee = round_money(schedule.inspection_fee_per_device * devices, minor_units)
    storage_fee = round_money(schedule.storage_fee_per_device * to_storage, minor_units)
    before_gateway = retrieval_fee + inspection_fee + storage_fee
    gateway_fee = (
        percent_of(before_gateway, schedule.gateway_percent, minor_units)
        if payment_method == PaymentMethod.CARD
        else zero
    )
    return Charges(
        amount=zero,
        insurance=zero,
        gateway_fee=gateway_fee,
        onboarding_fee=zero,
        device_config_fee=zero,
        platform_fee=zero,
        retrieval_fee=retrieval_fee,
        inspection_fee=inspection_fee,
        storage_fee=storage_fee,
    )


@lru_cache(maxsize=512)
def minor_units_of(currency_code: str) -> int:
    """Decimal places of a currency per ISO 4217 (the currencies table's source): 2 for NGN and
    USD, 0 for JPY, 3 for IQD."""
    return minor_units(currency_code)


def to_minor_units(amount: Decimal, currency_code: str) -> Decimal:
    """A stored amount as the currency writes it: "828942.38", never "828942.380000"."""
    return round_money(amount, minor_units_of(currency_code))
