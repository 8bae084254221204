"""Tracking an order to the door: operators move its items' stages forward, or cancel it.

Stages only move forward, one or more at a time; a move records every stage it passes, in order,
in the item's `stages`. A retrieval item reaching `received` moves its device out of its
employee's hands: to In_Storage (destination `storage`) or Unassigned (`office`), with the
history entry and the equipment event. The order is `completed` once every item is at its kind's
last stage. Each move writes one `order.updated` event (the order as `GET /client/orders/{id}`
answers it, so every item's stage and stages), and `order.completed` when it completes.

Callers bind the session to the order's company first (`orders_for_operator` in the CLI)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from sqlalchemy.orm import Session

from outfitter.core.errors import Conflict, NotFound, ValidationFailed
from outfitter.db.base import utcnow
from outfitter.equipment import lifecycle
from outfitter.equipment.events import record_equipment_events
from outfitter.models import (
    STAGES,
    Equipment,
    EquipmentStatus,
    EventType,
    Order,
    OrderItem,
    OrderKind,
    OrderStage,
    OrderStatus,
    RetrievalDestination,
)
from outfitter.payments.events import record_order_event
from outfitter.payments.presenters import stage_entry
from outfitter.payments.repository import held_by, lock_devices, lock_order

logger = logging.getLogger("outfitter.payments")
OPERATOR_ACTOR = "operator"

# Where a retrieved device goes once received.
RECEIVED_STATUS = {
    RetrievalDestination.STORAGE: EquipmentStatus.IN_STORAGE,
    RetrievalDestination.OFFICE: EquipmentStatus.UNASSIGNED,
}
EVENT_FOR_RECEIVED = {
    EquipmentStatus.IN_STORAGE: EventType.EQUIPMENT_MOVED_TO_STORAGE,
    EquipmentStatus.UNASSIGNED: EventType.EQUIPMENT_UNASSIGNED,
}


def _open_order(session: Session, order_id: uuid.UUID) -> Order:
    order = lock_order(session, order_id)
    if order is None:
        raise NotFound(f"No order with id {order_id}.")
    if order.status == OrderStatus.CANCELLED:
        raise Conflict(f"Order {order.id} is cancelled: its stages no longer move.")
    if order.status == OrderStatus.COMPLETED:
        raise Conflict(f"Order {order.id} is completed: every item is at its last stage.")
    return order


def advance(
    session: Session,
    order_id: uuid.UUID,
    stage: str,
    item_id: uuid.UUID | None = None,
    note: str | None = None,
    actor: str = OPERATOR_ACTOR,
) -> Order:
    """Move every item (or the one named) forward to `stage`."""
    order = _open_order(session, order_id)
    path = STAGES[order.kind]
    target = OrderStage(stage) if stage in path else None
    if target is None:
        raise ValidationFailed.field(
            "stage", f"Unknown stage {stage!r} for a {order.kind} order; choose from {', '.join(path)}."
        )
    items = sorted(order.items, key=lambda item: str(item.id))
    if item_id is not None:
        items = [item for item in items if item.id == item_id]
        if not items:
            raise NotFound(f"Order {order.id} has no item {item_id}.")
    for item in items:
        if path.index(item.stage) >= path.index(target):
            raise Conflict(
                f"Item {item.id} is already at {item.stage}: stages only move forward ({' > '.join(path)})."
            )
    return _move_items(session, order, items, target, note, actor)


def receive(session: Session, order_id: uuid.UUID, item_ids: Sequence[uuid.UUID] | None, actor: str) -> Order:
    """The company marks the items of a retrieval coming back to its office received (every such
    item not yet received when `item_ids` is None): they reach `received`, the last stage of an
    office item, and their devices leave their employees (Unassigned)."""
    order = _open_order(session, order_id)
    if order.kind != OrderKind.RETRIEVAL:
        raise Conflict(f"Order {order.id} is a {order.kind} order: only a retrieval's devices are received.")
    path = STAGES[order.kind]
    waiting = [item for item in order.items if path.index(item.stage) < path.index(OrderStage.RECEIVED)]
    if item_ids is None:
        items = [item for item in waiting if item.destination == RetrievalDestination.OFFICE]
        if not items:
            raise Conflict(
                f"Order {order.id} has no item coming back to the office still to receive; items going to "
                "storage are received there, by Outfitter."
            )
    else:
        by_id = {item.id: item for item in order.items}
        unknown = {
            f"item_ids.{index}": [f"Order {order.id} has no item {item_id}."]
            for index, item_id in enumerate(item_ids)
            if item_id not in by_id
        }
        if unknown:
            raise ValidationFailed.fields(unknown)
        items = list({item_id: by_id[item_id] for item_id in item_ids}.values())
        for item in items:
            if item.destination != RetrievalDestination.OFFICE:
                raise Conflict(
                    f"Item {item.id} goes to storage: Outfitter marks it received when it arrives there; "
                    "only items coming back to the office are received by the company."
                )
            if item not in waiting:
                raise Conflict(f"Item {item.id} is already at {item.stage}: it was received before.")
    return _move_items(
        session, order, sorted(items, key=lambda item: str(item.id)), OrderStage.RECEIVED, None, actor
    )


def last_stage(order: Order, item: OrderItem) -> OrderStage:
    """Where an item's journey ends: its kind's last stage, but `received` for a retrieval item coming
    back to the company's office (there is nothing of Outfitter's left to do with it)."""
    if item.destination == RetrievalDestination.OFFICE:
        return OrderStage.RECEIVED
    return STAGES[order.kind][-1]


def _move_items(
    session: Session,
    order: Order,
    items: Sequence[OrderItem],
    target: OrderStage,
    note: str | None,
    actor: str,
) -> Order:
    """Move `items` (each behind `target`) forward to it, recording every stage passed, receiving
    the devices of retrieval items that pass `received`, and completing the order when every item
    is at its last stage."""
    path = STAGES[order.kind]
    now = utcnow()
    received: list[OrderItem] = []
    for item in items:
        passed = path[path.index(item.stage) + 1 : path.index(target) + 1]
        # The note belongs to the stage asked for; the ones passed on the way have none.
        entries = [stage_entry(each, now, note if each == target else None) for each in passed]
        item.stages = [*(item.stages or []), *entries]  # a new list: JSON columns track assignment only
        item.stage = target
        if order.kind == OrderKind.RETRIEVAL and OrderStage.RECEIVED in passed:
            received.append(item)
    _receive_devices(session, order, received, actor)
    if all(path.index(item.stage) >= path.index(last_stage(order, item)) for item in order.items):
        order.status = OrderStatus.COMPLETED
    order.updated_at = now
    record_order_event(session, EventType.ORDER_UPDATED, order, actor)
    if order.status == OrderStatus.COMPLETED:
        record_order_event(session, EventType.ORDER_COMPLETED, order, actor)
    return order


def _receive_devices(session: Session, order: Order, items: Sequence[OrderItem], actor: str) -> None:
    """The devices of retrieval items just received leave their employees."""
    ids = [item.equipment_id for item in items if item.equipment_id is not None]
    if not ids:
        return
    devices = lock_devices(session, ids)
    changes: list[tuple[EventType, Equipment]] = []
    for item in items:
        equipment = devices.get(item.equipment_id) if item.equipment_id else None
        if equipment is None or not held_by(equipment, item.employee_id):
            # Moved by hand since the offboarding was paid for (or deleted): left where it is.
            logger.warning(
                "order %s: equipment %s was not with its employee when received", order.id, item.equipment_id
            )
            continue
        status = RECEIVED_STATUS[item.destination or RetrievalDestination.STORAGE]
        lifecycle.move(
            session, equipment, status, actor, None, {"order_id": str(order.id), "tx_ref": order.tx_ref}
        )
        changes.append((EVENT_FOR_RECEIVED[status], equipment))
    record_equipment_events(session, changes, actor)


def cancel(session: Session, order_id: uuid.UUID, actor: str = OPERATOR_ACTOR) -> Order:
    """Stop tracking an order in progress. Items keep the stages they reached; devices keep their
    status (a retrieval's devices not yet received stay Assigned to their employees). No refund
    is made here: an operator settles money by hand."""
    order = _open_order(session, order_id)
    order.status = OrderStatus.CANCELLED
    order.updated_at = utcnow()
    record_order_event(session, EventType.ORDER_UPDATED, order, actor)
    return order
