"""Coordinators hosted by a broker (the classic group coordinator lives in ``group``)."""
