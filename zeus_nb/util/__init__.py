"""Zeus's older ``zeus.util`` path: ``from zeus_nb.util.env import get_env`` works too."""
