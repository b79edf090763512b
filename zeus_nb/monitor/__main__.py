"""``python -m zeus_nb.monitor energy|power``: live GPU energy or power (Zeus's monitor CLI)."""

from zeus_nb.monitor.cli import energy, main, power

__all__ = ["energy", "power"]

if __name__ == "__main__":
    raise SystemExit(main())
