"""The hand-written half of the Zeus compatibility table: what cannot work here, and notes.

Keys are full Zeus names or module prefixes (``zeus.optimizer.batch_size.server`` covers every
name below it). ``tools/zeus_compat.py`` checks every other recorded name by importing it.
"""

# Not provided at all: internals of Zeus's HTTP servers, their database and its monitors' helper
# processes, which a user's training script never imports.
UNSUPPORTED: dict[str, str] = {
    "zeus.monitor.carbon.Op": "the message type of Zeus's polling process; zeus-nb has no "
    "polling process (a window's energy is weighted by the provider's values over its span)",
    "zeus.monitor.price.Op": "the message type of Zeus's polling process; zeus-nb has none",
    "zeus.monitor.energy.MeasurementState": "the open-window bookkeeping inside Zeus's "
    "ZeusMonitor; zeus-nb's monitor keeps its own",
    "zeus.monitor.power.PowerSample": "the message Zeus's power-sampling process sends; zeus-nb "
    "samples on a thread and keeps (time, W) pairs, read through get_power_timeline()",
    "zeus.monitor.temperature.TemperatureSample": "the message Zeus's temperature-sampling "
    "process sends; zeus-nb samples on a thread, read through get_temperature_timeline()",
}

# Importable, but constructing or calling them raises our one-line error with the reason.
PLACEHOLDERS: dict[str, str] = {}

NOTES: dict[str, str] = {}

# Differences of signature kept on purpose: {full name: {problem the check reports: why}}. The
# name counts as compatible (calls written for Zeus work), and the reason is shown in the docs.
DEVIATIONS: dict[str, dict[str, str]] = {
    "zeus.optimizer.power_limit.ZeusCost": {
        "constructor: world_size defaults to None (Zeus: 1)": "world_size=None counts the GPUs "
        "the energy was summed over (every rank's under torch.distributed), so MaxPower matches "
        "the energy; pass world_size=1 for Zeus's arithmetic",
    },
    "zeus.monitor.energy.ZeusMonitor": {
        "begin_window(): sync_execution defaults to None (Zeus: True)": "None means the "
        "monitor's own sync_execution setting, True unless the monitor was built with False",
        "end_window(): sync_execution defaults to None (Zeus: True)": "as for begin_window()",
    },
}
