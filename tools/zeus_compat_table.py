"""The hand-written half of the Zeus compatibility table: what cannot work here, and notes.

Keys are full Zeus names or module prefixes (``zeus.optimizer.batch_size.server`` covers every
name below it). ``tools/zeus_compat.py`` checks every other recorded name by importing it.
"""

# Not provided at all: internals of Zeus's HTTP servers, their database and its monitors' helper
# processes, which a user's training script never imports.
UNSUPPORTED: dict[str, str] = {
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
    # --- device layer: Jetson --------------------------------------------------------------------
    "zeus.device.soc.jetson.Jetson": "Jetson power rails are not read",
    "zeus.device.soc.jetson.JetsonMeasurement": "Jetson power rails are not read",
    "zeus.device.soc.jetson.PowerMeasurementStrategy": "Jetson power rails are not read",
    "zeus.device.soc.jetson.DirectPower": "Jetson power rails are not read",
    "zeus.device.soc.jetson.VoltageCurrentProduct": "Jetson power rails are not read",
}

_BSO = "zeus.optimizer.batch_size"
_PFO = "zeus.optimizer.pipeline_frequency"

NOTES: dict[str, str] = {
    "zeus.device.gpu.nvidia.ZeusdNVIDIAGPU": "Reads through NVML in the process, sets through "
    "the daemon (capabilities checked when it is made); what it changed is put back through the "
    "daemon at interpreter exit. `NVIDIAGPUs` does not switch to it from `ZEUSD_*` variables.",
    "zeus._legacy.simulate.Simulator": "The NSDI '23 trace-driven simulator over this package's "
    "batch-size optimizer and simulator: the same policy and run rules, not Zeus's random draws "
    "(results agree in distribution); `verbose` logs instead of printing. See "
    "batch_size_optimizer.md.",
    "zeus.utils.lr_scaler.SquareRootScaler": "A non-positive `bs` or `lr` raises `InputError`.",
    "zeus.utils.lr_scaler.LinearScaler": "A non-positive `bs` or `lr` raises `InputError`.",
    "zeus.monitor.energy.ZeusMonitor": "Extra keyword arguments `backend=`, `system=`, "
    "`sync_execution=`, `energy_reads=`; `window(key)` context manager, `open_windows`, "
    "`end_window(..., wait_for_counter=True)`. Where a GPU's counter is slow to read (its first "
    "four reads over 1 ms each, as on an H100) it is read in the background and each window's "
    "energy shares out the counter's steps by power (measuring.md); elsewhere windows read it as "
    "Zeus's do. `monitor.gpus` iterates over the monitored GPUs. The log file is appended to "
    "(Zeus overwrites it) and must have the same columns. Zeus's zero-energy warning comes once "
    "per monitor, with advice added.",
    "zeus.monitor.energy.Measurement": "`total_energy` is the GPUs' energy only, as in Zeus; "
    "`soc_energy` is always None (no SoC support); extra `average_power`, `energy_method` (how "
    "each GPU's energy was obtained) and `approximate`.",
    "zeus.monitor.power.PowerMonitor": "Samples on a daemon thread of this process, not a "
    "spawned process, so `__main__` is never imported again; stops on `stop()`, garbage "
    "collection and interpreter exit. `update_period=None` means 0.1 s. Every sample is kept. "
    "`get_energy` integrates the timeline with the trapezoidal rule between the two times, the "
    "edges interpolated from the samples on either side (Zeus integrates only the samples "
    "inside, so a sampler held off at an edge loses that time), and `stop()` takes a last "
    "sample.",
    "zeus.monitor.power.PowerDomain": "NVML: read through `nvmlDeviceGetFieldValues` where the "
    "driver has them, else `nvmlDeviceGetPowerUsage` stands for `device_instant`. Simulated GPU: "
    "`device_instant` and `device_average` (the trace's average power).",
    "zeus.monitor.temperature.TemperatureMonitor": "A thread, as `PowerMonitor`; values are "
    "floats. The simulated GPU has no temperature (the traces hold none): `UnsupportedError`.",
    "zeus.monitor.carbon.CarbonEmissionMonitor": "Zeus's hour-by-hour conversion; the polling "
    "loop runs on a thread of this process, not a spawned process, and on a simulated GPU's "
    "virtual clock the hours are those of simulated time. Each hour gets its share of the "
    "window's energy as the monitor measured it. A provider known at any time (`FixedIntensity`, "
    "`CsvIntensity`) gives its time-weighted mean over the span measured in each hour; extra "
    "`total_carbon_emission` on the measurement; keyword arguments such as `system=` go to the "
    "`ZeusMonitor`.",
    "zeus.monitor.price.EnergyCostMonitor": "As `CarbonEmissionMonitor`; extra "
    "`total_energy_cost` on the measurement. Schedules of OpenEI rates are read in this "
    "machine's local time (Zeus reads them in UTC).",
    "zeus.monitor.carbon.CarbonIntensityProvider": "Zeus's abstract interface; the offline "
    "providers `FixedIntensity(value)` and `CsvIntensity(path)` (rows of `time,value`) implement "
    "it from `value_at(unix_time)` and keep notebook runs deterministic.",
    "zeus.monitor.carbon.ElectrictyMapsClient": "Sends `api_key=` (or "
    "`ZEUS_NB_ELECTRICITYMAPS_KEY`) as the `auth-token` header where given; `base_url=`, "
    "`timeout=`; `ElectricityMapsClient` is the correctly spelled alias.",
    "zeus.monitor.price.OpenEIClient": "Needs your own free OpenEI key, `api_key=` (or "
    "`ZEUS_NB_OPENEI_KEY`): Zeus falls back to the key it publishes for its own users, which "
    "zeus-nb does not borrow, so constructing it without one raises saying where to get one; "
    "`value_at(t)` is the price in force at a time (first tier of the period the "
    "weekday/weekend schedule names); `base_url=`, `timeout=`, `cache_seconds=`.",
    "zeus.device.cpu.rapl.RaplWraparoundTracker": "Polls on a daemon thread, not a spawned "
    "process; `get_num_wraparounds(reading_uj)` also counts a wrap that a read saw first.",
    "zeus.device.cpu.rapl.RAPLFile": "Keeps a descriptor of `energy_uj` and reads it with "
    "`pread`; its tracker starts on the first `read()`.",
    "zeus.device.cpu.rapl.rapl_is_available": "`ZEUS_NB_POWERCAP_ROOT` names another RAPL folder "
    "(tests); not cached.",
    "zeus.device.cpu.get_cpus": "The CPUs of the current GPU system: RAPL beside real GPUs, the "
    "simulated CPU beside simulated ones; rebuilt when the system changes.",
    "zeus.metric.EnergyCumulativeCounter": "The loop runs on a thread (`mp.get_context` is "
    '`zeus_nb.utils.multiprocessing`\'s, context `"thread"`); a first push that fails raises '
    "`PushgatewayError` from `begin_window`; windows under one gateway and job share a registry.",
    "zeus.metric.PowerGauge": "As `EnergyCumulativeCounter`.",
    "zeus.monitor.__main__.energy": "`--duration S` stops it without Ctrl+C; on the simulated "
    "backend the GPU follows the wall clock there.",
    "zeus.utils.env.get_env": "Booleans also accept `1/0`, `yes/no`, `on/off`; errors name the "
    "variable.",
    "zeus.optimizer.power_limit.GlobalPowerLimitOptimizer": "Zeus's states, transitions and "
    "sequence of limit changes by default; extra `adaptive=True` (skip limits that cannot win) "
    "and `resume_across_epochs=True` (pause a window over an epoch's end), which zeus-nb's own "
    "entry points use. Restores the original limits at exit (Zeus sets the maximum). "
    "`plo.power_limits` and `plo.optimal_power_limit` are in W, `plo.state` and "
    "`plo.current_power_limit` in mW as in Zeus; see power_limit_optimizer.md.",
    # --- device layer -------------------------------------------------------------------------
    "zeus.exception.ZeusBaseError": (
        "the same class as zeus_nb.errors.ZeusNbError: catching it catches every zeus-nb error"
    ),
    "zeus.device.gpu.get_gpus": (
        "the current zeus-nb GPU system itself (NVML, simulated or replayed: each is a GPUs), in "
        "mW/mJ; ZEUSD_* variables are ignored"
    ),
    "zeus.device.gpu.nvidia.NVIDIAGPUs": (
        "zeus-nb's NVML backend itself; NVML calls go through this module's `pynvml`, as in "
        "Zeus; power limits and SM clocks set through it are restored at exit and by "
        "`zeus-nb restore`"
    ),
    "zeus.device.gpu.nvidia.NVIDIAGPU": (
        "zeus-nb's NVML GPU itself (with helpers in W and J); settings changes restored at exit "
        "as zeus-nb's own"
    ),
    "zeus.device.gpu.nvidia.nvml_is_available": (
        "also False when NVML starts but lists no visible GPU; not cached"
    ),
    "zeus.device.gpu.common.GPUs": (
        "a simulated GPU has no memory clocks or temperature (ZeusGPUNotSupportedError) and "
        "persistence mode is a flag there"
    ),
    "zeus.device.gpu.amdsmi_is_available": "amdsmi is looked up at each call (not cached)",
    "zeus.device.gpu.amd.amdsmi_is_available": "amdsmi is looked up at each call (not cached)",
    "zeus.device.gpu.amd.AMDGPU": (
        "over amdsmi, looked up when used (without it: AMDUnsupportedError, a ZeusGPUInitError, "
        "saying what to install); power limits and clock ranges changed through it are put back "
        "at exit (`restore_settings()`); `get_supported_*_clocks` are amdsmi's (max, min)"
    ),
    "zeus.device.gpu.amd.AMDGPUs": (
        "over amdsmi as `AMDGPU`; HIP indices, HIP_VISIBLE_DEVICES else CUDA_VISIBLE_DEVICES. "
        "zeus-nb's own backends (get_gpus(), ZeusMonitor's default) stay NVML and simulated"
    ),
    "zeus.device.soc.get_soc": (
        "Apple silicon where available (zeus-apple-silicon on a Mac), else ZeusSoCInitError, as "
        "Zeus's does without a SoC; Jetson is not read"
    ),
    "zeus.device.soc.apple.AppleSilicon": (
        "over the zeus-apple-silicon binding, looked up when constructed (without it, or off "
        "an Apple silicon Mac: ZeusAppleInitError saying why)"
    ),
    "zeus.device.soc.apple.apple_silicon_is_available": "not cached",
    "zeus.device.soc.jetson.jetson_is_available": "always False",
    "zeus.device.soc.apple.zeus_apple_silicon": (
        "the binding module as of this moment, or None where it cannot be imported"
    ),
    "zeus.device.common.has_sys_admin": "reads CapEff from /proc/self/status; not cached",
    "zeus.utils.zeusd.ZeusdConfig": "make_client() is an httpx.Client (the `net` extra)",
    "zeus.utils.zeusd.ZeusdClient": (
        "httpx (the `net` extra); a transport failure during a call is a ZeusdError naming the "
        "call; `close()` and `with` close the connection"
    ),
    "zeus.monitor.power_streaming.PowerStreamingClient": (
        "streams from zeusd daemons (httpx, the `net` extra); also a context manager. Power of "
        "this process's GPUs needs no daemon: PowerMonitor"
    ),
    "zeus.utils.lat_lon.get_ip_lat_long": (
        "waits at most `timeout=5` s; offline or without a usable answer it raises "
        "`LocationLookupError` (an OSError) saying to pass (latitude, longitude) instead"
    ),
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
