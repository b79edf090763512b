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
    # zeus-nb's batch-size optimizer server has Zeus's app, settings, sessions and errors;
    # its insides are zeus-nb's (docs/batch_size_optimizer.md, "The server").
    **{
        f"zeus.optimizer.batch_size.server.{inner}": (
            "internals of Zeus's batch-size optimizer server; zeus-nb's server (same routes and "
            "app) keeps a zeus-nb store and decides with PaperBatchSizeOptimizer (server.jobs, "
            "server.policy, server.service)"
        )
        for inner in (
            "batch_size_state",
            "database.repository",
            "explorer",
            "job",
            "mab",
            "optimizer",
            "services",
        )
    },
    **{
        f"zeus.optimizer.batch_size.server.database.schema.{table}": (
            "a table or enum of Zeus's server database; zeus-nb's server database is a zeus-nb "
            "store (jobs, observations, trials) plus bso_server_jobs and bso_server_trials"
        )
        for table in (
            "BatchSizeTable",
            "GaussianTsArmStateTable",
            "JobTable",
            "TrialStatus",
            "TrialTable",
            "TrialType",
        )
    },
    "zeus.optimizer.batch_size.migrations": (
        "Alembic migrations of Zeus's server database; zeus-nb's store creates and versions its "
        "own tables"
    ),
    "zeus.optimizer.pipeline_frequency.server": (
        "internals of Zeus's PFO server (FastAPI app, job manager, schedulers); zeus-nb plans "
        "in process, and server_url names the schedule file the server's PointSolution would "
        "serve"
    ),
}

# Importable, but constructing or calling them raises our one-line error with the reason.
PLACEHOLDERS: dict[str, str] = {
    # --- device layer: other vendors' devices, Zeus's daemon --------------------------------
    "zeus.device.gpu.amd.AMDGPU": "AMD GPUs (amdsmi) are not read; raises AMDUnsupportedError",
    "zeus.device.gpu.amd.AMDGPUs": "AMD GPUs (amdsmi) are not read; raises AMDUnsupportedError",
    "zeus.device.gpu.nvidia.ZeusdNVIDIAGPU": (
        "zeus-nb sets GPUs through NVML in the process, not through zeusd"
    ),
    "zeus.device.soc.apple.AppleSilicon": "Apple silicon counters are not read",
    "zeus.device.soc.apple.AppleSiliconMeasurement": "Apple silicon counters are not read",
    "zeus.device.soc.jetson.Jetson": "Jetson power rails are not read",
    "zeus.device.soc.jetson.JetsonMeasurement": "Jetson power rails are not read",
    "zeus.device.soc.jetson.PowerMeasurementStrategy": "Jetson power rails are not read",
    "zeus.device.soc.jetson.DirectPower": "Jetson power rails are not read",
    "zeus.device.soc.jetson.VoltageCurrentProduct": "Jetson power rails are not read",
    "zeus.utils.zeusd.ZeusdClient": (
        "zeus-nb talks to NVML and RAPL directly, not through Zeus's daemon zeusd"
    ),
    "zeus.utils.zeusd.require_capabilities": "no zeusd client exists to check",
    "zeus.monitor.power_streaming.PowerStreamingClient": (
        "streams from zeusd; sample power in the process with zeus_nb.monitor.PowerMonitor"
    ),
}

_BSO = "zeus.optimizer.batch_size"
_PFO = "zeus.optimizer.pipeline_frequency"

NOTES: dict[str, str] = {
    "zeus._legacy.simulate.Simulator": "The NSDI '23 trace-driven simulator over this package's "
    "batch-size optimizer and simulator: the same policy and run rules, not Zeus's random draws "
    "(results agree in distribution); `verbose` logs instead of printing. See "
    "batch_size_optimizer.md.",
    "zeus.utils.lr_scaler.SquareRootScaler": "A non-positive `bs` or `lr` raises `InputError`.",
    "zeus.utils.lr_scaler.LinearScaler": "A non-positive `bs` or `lr` raises `InputError`.",
    "zeus.monitor.energy.ZeusMonitor": "Extra keyword arguments `backend=`, `system=`, "
    "`sync_execution=`; `window(key)` context manager, `open_windows`. The log file is appended "
    "to (Zeus overwrites it) and must have the same columns. A zero-energy window longer than the "
    "counter's update period warns once, naming `approx_instant_energy`.",
    "zeus.monitor.energy.Measurement": "`total_energy` is the GPUs' energy only, as in Zeus; "
    "`soc_energy` is always None (no SoC support); extra `average_power`.",
    "zeus.monitor.power.PowerMonitor": "Samples on a daemon thread of this process, not a "
    "spawned process, so `__main__` is never imported again; stops on `stop()`, garbage "
    "collection and interpreter exit. `update_period=None` means 0.1 s. Every sample is kept. "
    "`get_energy` integrates the samples in the range with the trapezoidal rule.",
    "zeus.monitor.power.PowerDomain": "NVML: read through `nvmlDeviceGetFieldValues` where the "
    "driver has them, else `nvmlDeviceGetPowerUsage` stands for `device_instant`. Simulated GPU: "
    "`device_instant` and `device_average` (the trace's average power).",
    "zeus.monitor.temperature.TemperatureMonitor": "A thread, as `PowerMonitor`; values are "
    "floats. The simulated GPU has no temperature (the traces hold none): `UnsupportedError`.",
    "zeus.monitor.carbon.CarbonEmissionMonitor": "No polling process: a window's energy is "
    "spread evenly over its duration and weighted by the provider's values over that span; "
    "extra `total_carbon_emission` on the measurement.",
    "zeus.monitor.price.EnergyCostMonitor": "As `CarbonEmissionMonitor`; extra "
    "`total_energy_cost` on the measurement.",
    "zeus.monitor.carbon.CarbonIntensityProvider": "Providers also answer `value_at(unix_time)`; "
    "the offline providers `FixedIntensity(value)` and `CsvIntensity(path)` (rows of `time,value`) "
    "keep notebook runs deterministic.",
    "zeus.monitor.carbon.ElectrictyMapsClient": "Needs an API key (`api_key=` or "
    "`ZEUS_NB_ELECTRICITYMAPS_KEY`); `base_url=`, `timeout=`; `ElectricityMapsClient` is the "
    "correctly spelled alias.",
    "zeus.monitor.price.OpenEIClient": "Needs your own API key (`api_key=` or "
    "`ZEUS_NB_OPENEI_KEY`); `value_at(t)` is the price in force at a time (first tier of the "
    "period the weekday/weekend schedule names).",
    "zeus.monitor.__main__.energy": "`--duration S` stops it without Ctrl+C; on the simulated "
    "backend the GPU follows the wall clock there.",
    "zeus.utils.env.get_env": "Booleans also accept `1/0`, `yes/no`, `on/off`; errors name the "
    "variable. The older path `zeus_nb.util.env` works too.",
    "zeus.optimizer.power_limit.GlobalPowerLimitOptimizer": "Profiles adaptively by default "
    "(`adaptive=False` measures every limit); `plo.power_limits` and `plo.optimal_power_limit` "
    "are in W, `plo.state` and `plo.current_power_limit` in mW as in Zeus; see "
    "power_limit_optimizer.md.",
    # --- device layer -------------------------------------------------------------------------
    "zeus.exception.ZeusBaseError": (
        "the same class as zeus_nb.errors.ZeusNbError: catching it catches every zeus-nb error"
    ),
    "zeus.device.gpu.get_gpus": (
        "the GPUs of the current zeus-nb backend (NVML, simulated or replayed), in mW/mJ; "
        "one object per current system; ZEUSD_* variables are ignored"
    ),
    "zeus.device.gpu.nvidia.NVIDIAGPUs": (
        "over zeus-nb's NVML backend (the current system when it is NVML's); power limits and "
        "SM clocks set through it are restored at exit and by `zeus-nb restore`"
    ),
    "zeus.device.gpu.nvidia.NVIDIAGPU": (
        "over zeus-nb's NVML backend; settings changes restored at exit as zeus-nb's own"
    ),
    "zeus.device.gpu.nvidia.nvml_is_available": (
        "also False when NVML starts but lists no visible GPU; not cached"
    ),
    "zeus.device.gpu.common.GPUs": (
        "a simulated GPU has no memory clocks or temperature (ZeusGPUNotSupportedError) and "
        "persistence mode is a flag there"
    ),
    "zeus.device.gpu.amdsmi_is_available": "always False (AMD GPUs are not read)",
    "zeus.device.gpu.amd.amdsmi_is_available": "always False (AMD GPUs are not read)",
    "zeus.device.soc.get_soc": "always raises ZeusSoCInitError, as Zeus's does without a SoC",
    "zeus.device.soc.apple.apple_silicon_is_available": "always False",
    "zeus.device.soc.jetson.jetson_is_available": "always False",
    "zeus.device.soc.apple.zeus_apple_silicon": "None: the Apple binding is never loaded",
    "zeus.device.common.has_sys_admin": "reads CapEff from /proc/self/status; not cached",
    "zeus.utils.zeusd.ZeusdConfig": "a record only: make_client() raises (no zeusd client)",
    f"{_BSO}.client.BatchSizeOptimizer": (
        "server_url is a server's http(s):// URL (zeus-nb bso serve, or Zeus's) or a store "
        "(sqlite:///PATH, a path, postgresql://...: no server, zeus-nb's own bandit); None: "
        "$ZEUS_SERVER_URL, else the default store. With torch.distributed, rank 0 reports for "
        "every rank. See batch_size_optimizer.md."
    ),
    f"{_BSO}.common.JobSpec": (
        "A checked dataclass with pydantic-v1 methods (dict, json, parse_obj); unknown keywords "
        "are ignored, as pydantic does. The server uses mab_prior_mean, mab_prior_precision and "
        "mab_num_explorations (the paper policy); with a store, zeus-nb's bandit uses its own "
        "prior. beta_knob must be > 1 or None."
    ),
    f"{_BSO}.server.config.ZeusBsoSettings": (
        "A dataclass read from the same ZEUS_BSO_* variables; database_url defaults to the "
        "default store file (Zeus requires it) and takes store URLs (sqlite:///, "
        "postgresql://) as well as async ones."
    ),
    f"{_BSO}.server.router.app": (
        "Zeus's routes, bodies and status codes; decides with PaperBatchSizeOptimizer over a "
        "zeus-nb store (see batch_size_optimizer.md)."
    ),
    f"{_BSO}.exceptions.ZeusBSORuntimError": "Every ZeusBSO*Error is also a ZeusNbError.",
    f"{_PFO}.optimizer.PipelineFrequencyOptimizer": (
        "server_url names a schedule file (the planner's freqs_pipeline_NNNNN.py or a zeus-nb "
        "plan JSON, as a path or file://); torch.distributed is optional; zeus-nb's own call "
        "(plan, stage, gpu) works too. See pipeline_frequency.md."
    ),
    f"{_PFO}.frequency_controller.FrequencyController": (
        "Sets clocks in the calling process through zeus-nb's device layer (a settings guard "
        "restores them), not in a child process."
    ),
    f"{_PFO}.common.PFOServerSettings": "No server reads it; fields default to $ZEUS_PFO_*.",
    f"{_PFO}.common.InstructionProfilingResult": (
        "Its CSV has no blocking rows: load_profile(path, p2p_power=W) plans with it."
    ),
    # --- zeus.profile: thermally stable profiling (power_limit_optimizer.md) ---------------------
    "zeus.profile.measure": "Iterations are timed on the monitor's clock, not `time.monotonic()`: "
    "on the simulated GPU's virtual clock `target_function` must call `zeus_nb.step()` (one that "
    "never does is refused with `TargetFunctionError`). Temperatures are NaN where a GPU reports "
    "none (the simulated GPU), said once per call in the log. Non-positive durations raise "
    "`InputError`; an exception of `target_function` becomes a one-line `TargetFunctionError` "
    "(chained) and the open window is cancelled.",
    "zeus.profile.profile_parameters": "As `measure`. An empty search range raises `InputError` "
    "(Zeus falls back to 1-10 s; pass None for that); a cooldown of 0 s is allowed. Rank 0 "
    "alone logs, the calibration line included.",
    "zeus.profile.profile_measurement_duration": "As `profile_parameters`.",
    "zeus.profile.profile_cooldown_duration": "As `profile_parameters`.",
    "zeus.profile.TrialResult": "`temperature_before`/`_after` are NaN where a monitored GPU "
    "reports no temperature (the simulated GPU: the traces hold none).",
    "zeus.profile.SweepResult": "`str()` is Zeus's line, except that a duration one decimal "
    "would hide (0.02 s) prints with more digits.",
    "zeus.profile.SweepReport": "`str()` as `SweepResult`'s.",
}

# Differences of signature kept on purpose: {full name: {problem the check reports: why}}. The
# name counts as compatible (calls written for Zeus work), and the reason is shown in the docs.
_BSO_ROUTES = {"delete_job": "job_locks", "end_trial": "job_locks", "predict": "job_locks",
               "register_job": "prefix_locks", "report": "job_locks"}  # fmt: skip

DEVIATIONS: dict[str, dict[str, str]] = {
    **{
        f"{_BSO}.server.router.{route}": {
            "db_session has no default (Zeus: Depends(get_db_session))": "FastAPI fills the "
            "session and the locks (Annotated dependencies); routes are called over HTTP.",
            f"{locks} has no default (Zeus: Depends(get_{locks}))": "",
        }
        for route, locks in _BSO_ROUTES.items()
    },
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
