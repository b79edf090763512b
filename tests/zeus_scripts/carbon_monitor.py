"""Zeus's carbon-monitor example, in its shape; only its imports name zeus_nb.

``--offline`` swaps the live provider for a fixed intensity: Zeus's own example looks the
location up online (get_ip_lat_long), which fails with a one-line error saying what to pass
instead where the lookup service cannot be reached.
"""

import sys

from zeus_nb.monitor.carbon import CarbonEmissionMonitor, ElectrictyMapsClient
from zeus_nb.monitor.providers import FixedIntensity
from zeus_nb.utils.lat_lon import get_ip_lat_long


def main() -> None:
    if "--offline" in sys.argv:
        provider = FixedIntensity(400.0)
    else:
        provider = ElectrictyMapsClient(location=get_ip_lat_long())
    monitor = CarbonEmissionMonitor(provider, gpu_indices=[0])
    monitor.begin_window("training")
    total = sum(i * i for i in range(200_000))  # the work
    measurement = monitor.end_window("training")
    print(f"{total} {measurement.time:.3f} s {measurement.gpu_carbon_emission[0]:.6f} gCO2eq")


if __name__ == "__main__":
    main()
