"""Imports every model, so the metadata is complete for migrations and for relationship strings."""

from outfitter.catalog.models import *  # noqa: F403
from outfitter.core.models import *  # noqa: F403
from outfitter.db.base import Base
from outfitter.equipment.models import *  # noqa: F403
from outfitter.payments.models import *  # noqa: F403
from outfitter.people.models import *  # noqa: F403

metadata = Base.metadata
