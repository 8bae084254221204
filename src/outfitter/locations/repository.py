"""Every query of the locations domain: the tree's rows (scoped to the company by the session),
a subtree by its path range, the moves of a subtree, and the devices' counts by location."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Sequence

from sqlalchemy import ColumnElement, Select, String, and_, func, literal, or_, select, update
from sqlalchemy.orm import joinedload

from outfitter.db.tenancy import CompanyRepository, parse_uuid
from outfitter.models import Equipment, EquipmentStatus, Location
from outfitter.models.locations import subtree_end

UNKNOWN_LOCATION = "No location with this id in this company."
# Devices that left (Sold, Archived) hold no place, even while they keep a home location.
PRESENT = (EquipmentStatus.ASSIGNED, EquipmentStatus.UNASSIGNED, EquipmentStatus.IN_STORAGE)


def within(path: str) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The conditions of the locations at and beneath `path`: one range of the path index."""
    return (Location.path >= path, Location.path < subtree_end(path))


class LocationRepository(CompanyRepository[Location]):
    model = Location
    label = "Location"

    def live(self) -> Select[Location]:
        return self.select(joinedload(Location.country)).where(Location.deleted_at.is_(None))

    def every(self) -> Select[Location]:
        """Deleted ones too: only `updated_since` shows them."""
        return self.select(joinedload(Location.country))

    def find_live(self, record_id: uuid.UUID | str, for_update: bool = False) -> Location | None:
        parsed = parse_uuid(record_id)
        if parsed is None:
            return None
        statement = self.live().where(Location.id == parsed)
        if for_update:  # read afresh: a move may have rewritten its path since it was read
            statement = statement.with_for_update(of=Location).execution_options(populate_existing=True)
        return self.session.scalars(statement).unique().one_or_none()

    def lock(self, ids: Collection[uuid.UUID], *, share: bool = False) -> dict[uuid.UUID, Location]:
        """Lock these live locations in id order (every tree write locks so: no deadlock), read
        afresh; `share`: against a delete or a move only (a device put there)."""
        statement = (
            self.live()
            .where(Location.id.in_(sorted(ids)))
            .order_by(Location.id)
            .with_for_update(of=Location, read=share)
            .execution_options(populate_existing=True)
        )
        return {location.id: location for location in self.session.scalars(statement).unique()}

    def named(self, ids: Collection[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of these locations (deleted ones too: a device's history keeps naming them)."""
        if not ids:
            return {}
        rows = self.session.execute(select(Location.id, Location.name).where(Location.id.in_(list(ids))))
        return {row.id: row.name for row in rows}

    def sibling_taken(self, sibling_name: str, except_id: uuid.UUID | None = None) -> bool:
        statement = select(Location.id).where(Location.sibling_name == sibling_name)
        if except_id is not None:
            statement = statement.where(Location.id != except_id)
        return self.session.scalar(statement.limit(1)) is not None

    def default_storage(self) -> Location | None:
        statement = self.live().where(Location.is_default_storage.is_(True))
        return self.session.scalars(statement).unique().one_or_none()

    def subtree(self, paths: Collection[str]) -> list[tuple[uuid.UUID, str]]:
        """(id, path) of the live locations at and beneath any of `paths`: one statement."""
        if not paths:
            return []
        statement = select(Location.id, Location.path).where(
            Location.deleted_at.is_(None), or_(*(and_(*within(path)) for path in paths))
        )
        return [(row.id, row.path) for row in self.session.execute(statement)]

    def deepest_beneath(self, path: str) -> int:
        statement = select(func.max(Location.depth)).where(Location.deleted_at.is_(None), *within(path))
        return int(self.session.scalar(statement) or 0)

    def children_count(self, location_id: uuid.UUID) -> int:
        statement = select(func.count()).where(
            Location.parent_id == location_id, Location.deleted_at.is_(None)
        )
        return int(self.session.scalar(statement) or 0)

    def move_subtree(self, old_path: str, new_path: str, depth_change: int) -> None:
        """Rewrite the paths (and depths) at and beneath `old_path` as beneath `new_path`: one UPDATE,
        so the subtree is never seen half moved."""
        self.session.flush()
        self.session.execute(
            update(Location)
            .where(*within(old_path))
            .values(
                path=literal(new_path, String) + func.substr(Location.path, len(old_path) + 1),
                depth=Location.depth + depth_change,
            )
            .execution_options(synchronize_session=False)
        )

    def clear_default_storage(self, except_id: uuid.UUID) -> None:
        self.session.execute(
            update(Location)
            .where(Location.is_default_storage.is_(True), Location.id != except_id)
            .values(is_default_storage=False)
            .execution_options(synchronize_session="fetch")
        )
        self.session.flush()

    # --- devices -------------------------------------------------------------------------------

    def status_counts(self, location_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[EquipmentStatus, int]]:
        """Devices by current location and status: one index-only GROUP BY."""
        counts: dict[uuid.UUID, dict[EquipmentStatus, int]] = defaultdict(dict)
        if not location_ids:
            return counts
        statement = (
            select(Equipment.location_id, Equipment.status, func.count())
            .where(Equipment.location_id.is_not(None), Equipment.location_id.in_(list(location_ids)))
            .group_by(Equipment.location_id, Equipment.status)
        )
        for location_id, status, count in self.session.execute(statement):
            if location_id is not None:
                counts[location_id][status] = count
        return counts

    def devices_holding(self, location_id: uuid.UUID) -> tuple[int, int]:
        """(devices here now, devices that call it home) among those still in the company."""
        here = select(func.count()).where(Equipment.location_id == location_id, Equipment.status.in_(PRESENT))
        home = select(func.count()).where(
            Equipment.home_location_id == location_id, Equipment.status.in_(PRESENT)
        )
        return int(self.session.scalar(here) or 0), int(self.session.scalar(home) or 0)
