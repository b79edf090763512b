"""Zeus's older import path of :func:`zeus_nb.utils.env.get_env`."""

from zeus_nb.utils.env import get_env

__all__ = ["get_env"]
