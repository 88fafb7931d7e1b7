"""The fleet's management routes under /api/v1 (enrollment, inventory, zones, explain,
rollouts, pins, the catalog)."""

from fastapi import APIRouter

from strataplane.api.v1 import delivery, fleet_enrollment, fleet_inventory

router = APIRouter(prefix="/api/v1")
router.include_router(fleet_enrollment.router)
router.include_router(fleet_inventory.router)
router.include_router(delivery.router)

__all__ = ["router"]
