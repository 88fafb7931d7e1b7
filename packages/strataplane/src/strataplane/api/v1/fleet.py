"""The fleet's management routes under /api/v1 (enrollment, inventory, zones, explain)."""

from fastapi import APIRouter

from strataplane.api.v1 import fleet_enrollment, fleet_inventory

router = APIRouter(prefix="/api/v1")
router.include_router(fleet_enrollment.router)
router.include_router(fleet_inventory.router)

__all__ = ["router"]
