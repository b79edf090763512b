"""The hand-written half of the Zeus compatibility table: what cannot work here, and notes.

Keys are full Zeus names or module prefixes (``zeus.optimizer.batch_size.server`` covers every
name below it). ``tools/zeus_compat.py`` checks every other recorded name by importing it.
"""

# Not provided at all: these are the internals of Zeus's HTTP servers and their database, which a
# user's training script never imports.
UNSUPPORTED: dict[str, str] = {}

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

NOTES: dict[str, str] = {
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
}
